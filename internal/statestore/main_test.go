package statestore

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore/s3test"
)

// s3srv is the versitygw every S3 test uses (nil: s3skip says why).
var (
	s3srv  *s3test.Server
	s3skip string
)

// TestMain starts versitygw (s3test) unless this is a child process of a
// benchmark, runs the tests, stops and reaps the server, then checks that
// no goroutine leaked (the S3 client's idle connections are closed first).
func TestMain(m *testing.M) {
	if runChild() {
		return
	}
	code := func() int {
		bin, skip, err := s3test.Binary()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		s3skip = skip
		if bin != "" {
			s3srv, err = s3test.Start(bin)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			restore := s3srv.Env()
			defer restore()
			defer s3srv.Stop()
		}
		return m.Run()
	}()
	if code == 0 {
		testTransport.CloseIdleConnections()
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testTransport carries every S3 test request, so TestMain can close its
// idle connections before the leak check.
var testTransport = &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second}

func testKey(t testing.TB) MasterKey {
	b := make([]byte, KeySize)
	rand.Read(b)
	k, err := NewMasterKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var testOwner = Owner{SidecarID: "sc-test", Hostname: "host-test"}

// kinds runs f once per store kind: "file" over a temp dir, "s3" over the
// shared versitygw under a fresh prefix (skipped only when s3skip says
// so). mk opens a Store of that kind with o (URL filled in); every store of
// one call shares the same location.
func kinds(t *testing.T, f func(t *testing.T, mk func(o Options) *Store)) {
	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		f(t, func(o Options) *Store {
			o.URL = "file://" + dir + "/store"
			return mustOpen(t, o)
		})
	})
	t.Run("s3", func(t *testing.T) {
		if s3srv == nil {
			t.Skip(s3skip)
		}
		prefix := "p" + randomHex(6)
		f(t, func(o Options) *Store {
			o.URL = s3srv.URL(prefix)
			if o.HTTPClient == nil {
				o.HTTPClient = &http.Client{Transport: testTransport}
			}
			return mustOpen(t, o)
		})
	})
}

func mustOpen(t testing.TB, o Options) *Store {
	t.Helper()
	if o.Key.IsZero() {
		o.Key = testKey(t)
	}
	if o.Owner == (Owner{}) {
		o.Owner = testOwner
	}
	if o.ScratchDir == "" {
		o.ScratchDir = t.TempDir()
	}
	s, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open(%s): %v", o.URL, err)
	}
	return s
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
