package e2e

// Shared steps of the state-store tests (docs/protocol.md §24): a master
// key file, a real S3 server (versitygw, internal/statestore/s3test), a
// proxy in front of it that can fail, and the shapes the tests read.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore/s3test"
)

// masterKeyFile writes a fresh 32-byte master key, mode 0600, and returns
// its path and bytes.
func masterKeyFile(t *testing.T) (string, []byte) {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "state.key")
	if err := os.WriteFile(p, k, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, k
}

// s3Server starts versitygw for the test (stopped at its end); the test
// skips when no binary is configured outside `make test`, and fails
// under it (ACPX_REQUIRE_S3=1).
func s3Server(t *testing.T) *s3test.Server {
	t.Helper()
	bin, skip, err := s3test.Binary()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	srv, err := s3test.Start(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// s3Wrapper is the startSidecarVia wrapper that gives a sidecar the S3
// server's credentials in its own environment (the AWS SDK's chain reads
// them; docs/protocol.md §24 says never from a session's env).
func s3Wrapper(srv *s3test.Server) []string {
	return []string{"/usr/bin/env", "AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey,
		"AWS_REGION=" + srv.Region, "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent"}
}

// faultProxy is a reverse proxy to an S3 server whose answers a test can
// break: mode 0 passes, 1 answers 503, 2 holds every request until the
// client gives up or the mode changes.
type faultProxy struct {
	srv  *httptest.Server
	mode atomic.Int32
}

func newFaultProxy(t *testing.T, endpoint string) *faultProxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p.mode.Load() {
		case 1:
			_, _ = io.Copy(io.Discard, r.Body)
			http.Error(w, "slow down", http.StatusServiceUnavailable)
			return
		case 2:
			for p.mode.Load() == 2 {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// publication is a proof's `publication` as tests read it.
type publication struct {
	State      string `json:"state"`
	Generation int64  `json:"generation"`
	Object     string `json:"object"`
	Bytes      int64  `json:"bytes"`
	Entries    int64  `json:"entries"`
	SHA256     string `json:"sha256"`
	Error      *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// proofPublication decodes the publication of a proof frame's JSON.
func proofPublication(t *testing.T, raw json.RawMessage) *publication {
	t.Helper()
	var p struct {
		Publication *publication `json:"publication"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	return p.Publication
}

// closeRaw closes session and returns the proof of its answer as JSON.
func closeRaw(t *testing.T, s *sidecar, session string) json.RawMessage {
	t.Helper()
	var res struct {
		Proof json.RawMessage `json:"proof"`
	}
	s.mustCall("session/close", map[string]any{"session": session, "reason": "e2e"}, &res)
	return res.Proof
}

// storeOpen is what the state-store tests read of an open's result.
type storeOpen struct {
	seedOpen
	Restore *struct {
		Generation int64    `json:"generation"`
		Entries    int64    `json:"entries"`
		Kept       []string `json:"kept"`
		FellBack   *struct {
			Generation int64 `json:"generation"`
			Error      struct {
				Code string `json:"code"`
			} `json:"error"`
		} `json:"fellBack"`
	} `json:"restore"`
}

// decryptAll restores key's archive from the file:// store at storeDir with
// the master key into a new directory (each of names, plus the record and
// journal, under it) and returns that directory. It takes the key over
// in the store: call it once the sidecars are done.
func decryptAll(t *testing.T, storeDir string, key []byte, sessionKey string, names []string) string {
	t.Helper()
	mk, err := statestore.NewMasterKey(key)
	if err != nil {
		t.Fatal(err)
	}
	st, err := statestore.Open(context.Background(), statestore.Options{URL: "file://" + storeDir, Key: mk,
		Owner: statestore.Owner{SidecarID: "e2e", Hostname: "e2e"}})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := st.Acquire(context.Background(), sessionKey)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	targets := map[string]string{"acpx-record": filepath.Join(out, "record.json")}
	for i := 0; i < 4; i++ {
		targets["acpx-journal."+strconv.Itoa(i)] = filepath.Join(out, "journal."+strconv.Itoa(i))
	}
	for _, n := range names {
		targets[n] = filepath.Join(out, n)
	}
	if _, err := st.Restore(context.Background(), lease, targets, out); err != nil {
		t.Fatalf("decrypting the archive: %v", err)
	}
	return out
}

func countFiles(dir string) int {
	n := 0
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func hexOf(b []byte) string    { return hex.EncodeToString(b) }
func b64Of(b []byte) string    { return base64.StdEncoding.EncodeToString(b) }
func b64URLOf(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
