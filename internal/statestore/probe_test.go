package statestore

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestProbe_ReachableStoresPass: an empty store and one holding a key
// both answer Probe, on file:// and S3.
func TestProbe_ReachableStoresPass(t *testing.T) {
	kinds(t, func(t *testing.T, open func(Options) *Store) {
		s := open(Options{})
		if err := s.Probe(ctxT(t)); err != nil {
			t.Fatalf("empty store: %v", err)
		}
		if _, err := s.ReadHead(ctxT(t), "k"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ReadHead of a missing key: %v, want ErrNotFound", err)
		}
	})
}

// TestProbe_MissingBucketAndDeadEndpointAreUnavailable (from a user
// trial): a bucket that does not exist is ErrUnavailable saying so — on
// Probe, and on a head read, where it was a missing head (ErrNotFound)
// and an open then retried "the head kept moving" — and an endpoint that
// does not answer is ErrUnavailable.
func TestProbe_MissingBucketAndDeadEndpointAreUnavailable(t *testing.T) {
	needS3(t)
	missing := strings.Replace(s3srv.URL("p"), "s3://"+s3srv.Bucket+"/", "s3://nosuch"+randomHex(4)+"/", 1)
	s := mustOpen(t, Options{URL: missing, HTTPClient: &http.Client{Transport: testTransport}})
	for op, err := range map[string]error{"Probe": s.Probe(ctxT(t)), "ReadHead": func() error { _, err := s.ReadHead(ctxT(t), "k"); return err }()} {
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "bucket does not exist") {
			t.Errorf("%s on a missing bucket: %v, want ErrUnavailable saying the bucket does not exist", op, err)
		}
	}
	dead := fmt.Sprintf("s3://%s/p?endpoint=http://127.0.0.1:1&region=%s&pathStyle=true", s3srv.Bucket, s3srv.Region)
	d := mustOpen(t, Options{URL: dead, Timeout: 2 * time.Second})
	if err := d.Probe(ctxT(t)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Probe of an endpoint that does not answer: %v, want ErrUnavailable", err)
	}
}
