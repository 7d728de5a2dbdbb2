package statestore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func needS3(t *testing.T) {
	if s3srv == nil {
		t.Skip(s3skip)
	}
}

// TestS3_ConditionalWritesAnswer412 records what versitygw v1.8.0 does
// with the conditions the fencing relies on (package doc): a stale
// If-Match on PutObject, If-None-Match: * over an existing object (on
// PutObject and on CompleteMultipartUpload), and a stale If-Match on
// DeleteObject all answer 412 and change nothing.
func TestS3_ConditionalWritesAnswer412(t *testing.T) {
	needS3(t)
	ctx := ctxT(t)
	c := s3srv.Client()
	bk := &s3srv.Bucket
	key := aws.String("cond/" + randomHex(6))
	put := func(body string, opt func(*s3.PutObjectInput)) (*s3.PutObjectOutput, error) {
		in := &s3.PutObjectInput{Bucket: bk, Key: key, Body: strings.NewReader(body)}
		opt(in)
		return c.PutObject(ctx, in, noRetry)
	}
	first, err := put("one", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put("two", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }); httpStatus(err) != 412 {
		t.Fatalf("If-None-Match:* over an existing object: %v, want 412", err)
	}
	second, err := put("two", func(in *s3.PutObjectInput) { in.IfMatch = first.ETag })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put("three", func(in *s3.PutObjectInput) { in.IfMatch = first.ETag }); httpStatus(err) != 412 {
		t.Fatalf("stale If-Match: %v, want 412", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bk, Key: key, IfMatch: first.ETag}, noRetry); httpStatus(err) != 412 {
		t.Fatalf("DeleteObject with a stale If-Match: %v, want 412", err)
	}
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bk, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if string(b) != "two" || aws.ToString(got.ETag) != aws.ToString(second.ETag) {
		t.Fatalf("object is %q (etag %s), want \"two\"", b, aws.ToString(got.ETag))
	}
	// multipart completion over an existing name
	mu, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: bk, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	part, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: bk, Key: key, UploadId: mu.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("mp")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: bk, Key: key, UploadId: mu.UploadId,
		IfNoneMatch: aws.String("*"), MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}}, noRetry)
	if httpStatus(err) != 412 {
		t.Fatalf("CompleteMultipartUpload with If-None-Match:* over an existing object: %v, want 412", err)
	}
	c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: bk, Key: key, UploadId: mu.UploadId})
}

// TestS3_MultipartPublishVerifiedByChecksum publishes an archive of
// several parts (5 MiB parts, 3 in flight): the stored object's composite
// SHA-256 is what the publication computed, and it restores.
func TestS3_MultipartPublishVerifiedByChecksum(t *testing.T) {
	needS3(t)
	ctx := ctxT(t)
	src := filepath.Join(t.TempDir(), "home")
	rnd := make([]byte, 13<<20)
	rand.Read(rnd)
	makeTree(t, src, map[string]node{"big": {kind: 'f', mode: 0o600, data: string(rnd)}, "small": {kind: 'f', mode: 0o644, data: "x"}})
	s := mustOpen(t, Options{URL: s3srv.URL("mp" + randomHex(4)), PartSize: 5 << 20, Concurrency: 3, HTTPClient: &http.Client{Transport: testTransport}})
	l, err := s.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := s.Publish(ctx, l, []Source{{Name: "home", Path: src}})
	if err != nil {
		t.Fatal(err)
	}
	b := s.b.(*s3Backend)
	out, err := b.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: b.key(pub.Object), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(aws.ToString(out.ChecksumSHA256), "-3") || aws.ToInt64(out.ContentLength) != pub.Bytes {
		t.Fatalf("stored object: checksum %q, %d bytes; publication %d bytes", aws.ToString(out.ChecksumSHA256), aws.ToInt64(out.ContentLength), pub.Bytes)
	}
	// the whole object's SHA-256 is the head's
	obj, _ := b.getObject(ctx, pub.Object)
	h := sha256.New()
	io.Copy(h, obj)
	obj.Close()
	if fmt.Sprintf("%x", h.Sum(nil)) != pub.SHA256 {
		t.Fatal("object SHA-256 differs from the publication's")
	}
	target := filepath.Join(t.TempDir(), "home")
	if _, err := s.Restore(ctx, l, map[string]string{"home": target}, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src, target)
	_ = base64.StdEncoding
}

// faultRT injects one fault into the next head write (a PUT of a key
// ending in "/head") and passes everything else to testTransport.
type faultRT struct {
	mu    sync.Mutex
	mode  string // "503", "drop-after", "hang-after", "hang-before"
	armed bool
	fired chan struct{}
	// failGets: that many head reads after the fault fail as a broken
	// connection ("drop-after-unreadable")
	failGets int
}

func (f *faultRT) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	if f.failGets > 0 && req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/head") {
		f.failGets--
		f.mu.Unlock()
		return nil, io.ErrUnexpectedEOF
	}
	fire := f.armed && req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/head")
	if fire {
		f.armed = false
	}
	f.mu.Unlock()
	if !fire {
		return testTransport.RoundTrip(req)
	}
	defer close(f.fired)
	switch f.mode {
	case "503":
		return &http.Response{StatusCode: 503, Status: "503 Service Unavailable", Header: http.Header{},
			Body: io.NopCloser(strings.NewReader("<Error><Code>ServiceUnavailable</Code></Error>")), Request: req}, nil
	case "hang-before":
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	resp, err := testTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if f.mode == "drop-after-unreadable" {
		f.mu.Lock()
		f.failGets = 20
		f.mu.Unlock()
	}
	if f.mode == "hang-after" {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return nil, io.ErrUnexpectedEOF // "drop-after": the write happened, the answer was lost
}

// TestPublish_UnknownOutcomeResolvedByReadingHead: a head write that
// fails with 503 or hangs before reaching the store leaves the previous
// head and returns ErrUnavailable; one that reached the store and whose
// answer was lost (dropped connection, timeout) is a success once the head
// read shows our bytes. Either way a later Publish succeeds (PROTOCOL
// §10.2: "An outcome the store leaves unknown is never retried blindly").
func TestPublish_UnknownOutcomeResolvedByReadingHead(t *testing.T) {
	needS3(t)
	for _, tc := range []struct {
		mode    string
		applied bool
	}{{"503", false}, {"hang-before", false}, {"drop-after", true}, {"hang-after", true}} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx := ctxT(t)
			rt := &faultRT{mode: tc.mode, fired: make(chan struct{})}
			s := mustOpen(t, Options{URL: s3srv.URL("uo" + randomHex(4)), HTTPClient: &http.Client{Transport: rt}, Timeout: time.Second})
			src := smallSource(t)
			l, err := s.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Publish(ctx, l, src); err != nil {
				t.Fatal(err)
			}
			before := rawHead(t, s, "k")
			rt.mu.Lock()
			rt.armed = true
			rt.mu.Unlock()
			pub, err := s.Publish(ctx, l, src)
			<-rt.fired
			after := rawHead(t, s, "k")
			if tc.applied {
				if err != nil {
					t.Fatalf("Publish whose head write landed: %v, want success", err)
				}
				var h Head
				if h, _ = decodeHead(after, l.dir); h.Generation != pub.Generation || h.Archive.Object != pub.Object {
					t.Fatalf("head %s does not name the publication %+v", after, pub)
				}
			} else {
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("Publish: %v, want ErrUnavailable", err)
				}
				if !bytes.Equal(before, after) {
					t.Fatalf("head changed:\n%s\n%s", before, after)
				}
				if n := len(archives(t, s, "k")); n != 1 {
					t.Fatalf("%d archives, want the head's only", n)
				}
			}
			pub2, err := s.Publish(ctx, l, src)
			if err != nil {
				t.Fatalf("later Publish: %v", err)
			}
			if h, _ := s.ReadHead(ctx, "k"); h.Generation != pub2.Generation || h.Archive.Object != pub2.Object {
				t.Fatalf("head after the later Publish: %+v", h)
			}
		})
	}
}

// TestPublish_UnknownOutcomeUnreadableHeadResolvedNextTime: the head write
// landed, its answer was lost and the head cannot be read either: Publish
// returns ErrUnavailable without a retry of the write, and the next
// Publish first reads the head, finds its own bytes, adopts them and
// publishes on top (never ErrFenced by its own write).
func TestPublish_UnknownOutcomeUnreadableHeadResolvedNextTime(t *testing.T) {
	needS3(t)
	ctx := ctxT(t)
	rt := &faultRT{mode: "drop-after-unreadable", fired: make(chan struct{})}
	s := mustOpen(t, Options{URL: s3srv.URL("uu" + randomHex(4)), HTTPClient: &http.Client{Transport: rt}, Timeout: time.Second})
	src := smallSource(t)
	l, err := s.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	rt.mu.Lock()
	rt.armed = true
	rt.mu.Unlock()
	if _, err := s.Publish(ctx, l, src); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Publish with an unknown outcome and an unreadable head: %v, want ErrUnavailable", err)
	}
	if l.pending == nil {
		t.Fatal("the unknown head write is not remembered")
	}
	rt.mu.Lock()
	rt.failGets = 0
	rt.mu.Unlock()
	landed, _ := decodeHead(rawHead(t, s, "k"), l.dir)
	if landed.Generation != 2 {
		t.Fatalf("the lost write did not land (generation %d): the test's fault is wrong", landed.Generation)
	}
	pub, err := s.Publish(ctx, l, src)
	if err != nil {
		t.Fatalf("next Publish: %v", err)
	}
	if pub.Generation != 3 {
		t.Fatalf("next publication generation %d, want 3", pub.Generation)
	}
	if h, _ := s.ReadHead(ctx, "k"); h.Previous == nil || h.Previous.Object != landed.Archive.Object {
		t.Fatalf("head %+v does not follow the landed one", h)
	}
}

// TestPublish_StoreDownIsUnavailable: a store that cannot be reached
// fails Publish with ErrUnavailable and the local files stay.
func TestPublish_StoreDownIsUnavailable(t *testing.T) {
	needS3(t)
	ctx := ctxT(t)
	good := mustOpen(t, Options{URL: s3srv.URL("down" + randomHex(4)), HTTPClient: &http.Client{Transport: testTransport}})
	l, err := good.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// the same lease through a store whose endpoint refuses connections
	down := mustOpen(t, Options{URL: "s3://" + s3srv.Bucket + "/x?endpoint=http://127.0.0.1:1&pathStyle=true", Key: good.key, Timeout: 2 * time.Second})
	l.s = down
	src := smallSource(t)
	if _, err := down.Publish(ctx, l, src); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Publish to a store that is down: %v, want ErrUnavailable", err)
	}
	if _, err := os.Stat(filepath.Join(src[0].Path, "f")); err != nil {
		t.Fatal(err)
	}
	if _, err := down.Acquire(ctx, "k"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Acquire: %v", err)
	}
	// a head with an archive, restored through the store that is down
	l.s = good
	if _, err := good.Publish(ctx, l, src); err != nil {
		t.Fatal(err)
	}
	env, scratch := t.TempDir(), t.TempDir()
	if _, err := down.Restore(ctx, l, map[string]string{"home": filepath.Join(env, "home")}, scratch); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Restore from a store that is down: %v, want ErrUnavailable", err)
	}
	if n := append(listDir(t, env), listDir(t, scratch)...); len(n) != 0 {
		t.Fatalf("a failed restore left %v", n)
	}
	_ = context.Background
}
