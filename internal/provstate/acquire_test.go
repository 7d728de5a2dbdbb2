package provstate

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore/s3test"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// storeKinds runs f over a file:// store and over a real S3 server
// (versitygw, internal/statestore/s3test: skipped without one, a failure
// under ACPX_REQUIRE_S3=1). f gets the store's URL and damage, which
// flips a byte in the middle of a stored object.
func storeKinds(t *testing.T, f func(t *testing.T, url string, damage func(t *testing.T, object string))) {
	t.Run("file", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "store")
		f(t, "file://"+root, func(t *testing.T, object string) {
			t.Helper()
			p := filepath.Join(root, filepath.FromSlash(object))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("s3", func(t *testing.T) {
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
		t.Cleanup(srv.Env())
		c := srv.Client()
		f(t, srv.URL("pv"), func(t *testing.T, object string) {
			t.Helper()
			ctx := context.Background()
			key := "pv/" + object
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &srv.Bucket, Key: &key})
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &srv.Bucket, Key: &key, Body: bytes.NewReader(b)}); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// sidecarsAt is newSidecars over the store at url.
func sidecarsAt(t *testing.T, url string, ids ...string) []sidecar {
	t.Helper()
	b := make([]byte, statestore.KeySize)
	_, _ = rand.Read(b)
	mk, err := statestore.NewMasterKey(b)
	if err != nil {
		t.Fatal(err)
	}
	var out []sidecar
	for _, id := range ids {
		ss, err := statestore.Open(context.Background(), statestore.Options{URL: url, Key: mk,
			Owner: statestore.Owner{SidecarID: id, Hostname: "h-" + id}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(filepath.Join(t.TempDir(), "state"))
		if err != nil {
			t.Fatal(err)
		}
		home := filepath.Join(t.TempDir(), "agent-home")
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		out = append(out, sidecar{k: Session{States: ss, Key: "k", Log: zap.NewNop(), Clean: strings.ToUpper, JournalMaxBytes: 1 << 20},
			st: st, src: []statestore.Source{{Name: "agent", Path: home}}})
	}
	return out
}

// publishedTwice has A take the key and publish two generations of its
// agent's state ("one", then "two"); it returns A's provider state and
// the head (archive: "two", previous: "one").
func publishedTwice(t *testing.T, a sidecar) (*State, *statestore.Head) {
	t.Helper()
	ctx := context.Background()
	la, _, e := a.k.Acquire(ctx, a.st, profiles.Profile{}, a.src)
	if e != nil {
		t.Fatal(e)
	}
	ps := New(la, a.src)
	for _, v := range []string{"one", "two"} {
		if err := os.WriteFile(filepath.Join(a.src[0].Path, "session.json"), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		ps.TreeLaunched()
		if pub := a.k.Publish(ctx, ps, a.st, true); pub.State != protocol.PublicationPublished {
			t.Fatalf("A's publication of %q: %+v", v, pub)
		}
	}
	h, err := a.k.States.ReadHead(ctx, "k")
	if err != nil || h.Archive == nil || h.Previous == nil {
		t.Fatalf("head %+v, %v", h, err)
	}
	return ps, h
}

// TestAcquire_CorruptArchiveRefusedBeforeTheTakeover (docs/protocol.md
// §24; a user trial found the head moved 9→10 by an open that failed
// STATE_CORRUPT, fencing the live owner): B's open of a key whose
// archives are both damaged fails STATE_CORRUPT with the head exactly as
// A left it, nothing placed in B's directories and no restore scratch
// left, and A — still the owner — publishes again.
func TestAcquire_CorruptArchiveRefusedBeforeTheTakeover(t *testing.T) {
	storeKinds(t, func(t *testing.T, url string, damage func(*testing.T, string)) {
		ctx := context.Background()
		sc := sidecarsAt(t, url, "A", "B")
		a, b := sc[0], sc[1]
		psA, h := publishedTwice(t, a)
		damage(t, h.Archive.Object)
		damage(t, h.Previous.Object)
		lb, r, e := b.k.Acquire(ctx, b.st, profiles.Profile{}, b.src)
		if e == nil || e.Data.Code != protocol.ErrStateCorrupt || lb != nil || r != nil {
			t.Fatalf("B's open over damaged archives: %v, %v, %v; want STATE_CORRUPT", lb, r, e)
		}
		after, err := a.k.States.ReadHead(ctx, "k")
		if err != nil || after.Generation != h.Generation || after.Owner != h.Owner {
			t.Fatalf("head after the refused open: %+v, %v; want generation %d owned by A", after, err, h.Generation)
		}
		if n, _ := os.ReadDir(b.src[0].Path); len(n) != 0 {
			t.Errorf("B's agent dir holds %d entries from damaged archives", len(n))
		}
		left, _ := filepath.Glob(filepath.Join(b.st.Dir(), statestore.RestoreScratchPrefix+"*"))
		if len(left) != 0 {
			t.Errorf("restore scratch left: %v", left)
		}
		psA.TreeLaunched()
		if pub := a.k.Publish(ctx, psA, a.st, true); pub.State != protocol.PublicationPublished {
			t.Fatalf("A's publication after B's refused open: %+v; A must still own the key", pub)
		}
	})
}

// TestAcquire_CorruptNewestArchiveFallsBackAndSaysSo (docs/protocol.md
// §24 "the head's previous archive is tried next"): with only the newest
// archive damaged, B restores the one before it and the open's restore
// says so in fellBack (the damaged generation, STATE_CORRUPT, the reason
// through Clean); B owns the key afterwards.
func TestAcquire_CorruptNewestArchiveFallsBackAndSaysSo(t *testing.T) {
	storeKinds(t, func(t *testing.T, url string, damage func(*testing.T, string)) {
		ctx := context.Background()
		sc := sidecarsAt(t, url, "A", "B", "C")
		a, b, c := sc[0], sc[1], sc[2]
		_, h := publishedTwice(t, a)
		damage(t, h.Archive.Object)
		lb, r, e := b.k.Acquire(ctx, b.st, profiles.Profile{}, b.src)
		if e != nil || r == nil || r.Generation != h.Previous.Generation {
			t.Fatalf("B's open: %+v, %v; want the previous generation %d restored", r, e, h.Previous.Generation)
		}
		fb := r.FellBack
		if fb == nil || fb.Generation != h.Archive.Generation || fb.Error.Code != protocol.ErrStateCorrupt ||
			fb.Error.Message == "" || fb.Error.Message != strings.ToUpper(fb.Error.Message) {
			t.Fatalf("restore.fellBack %+v: want generation %d, STATE_CORRUPT, a Clean'd reason", fb, h.Archive.Generation)
		}
		if got, _ := os.ReadFile(filepath.Join(b.src[0].Path, "session.json")); string(got) != "one" {
			t.Errorf("B's restored state %q, want the previous publication's", got)
		}
		if s := Status(New(lb, b.src)); s.Owner.SidecarID != "B" || s.Generation != h.Generation+1 {
			t.Errorf("B's head %+v, want generation %d owned by B", s, h.Generation+1)
		}
		// Without a fallback the field stays out.
		psB := New(lb, b.src)
		psB.TreeLaunched()
		if pub := b.k.Publish(ctx, psB, b.st, true); pub.State != protocol.PublicationPublished {
			t.Fatalf("B's publication %+v", pub)
		}
		if _, r, e := c.k.Acquire(ctx, c.st, profiles.Profile{}, c.src); e != nil || r == nil || r.FellBack != nil {
			t.Errorf("an open over good archives: %+v, %v; want a restore without fellBack", r, e)
		}
	})
}
