package statestore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLease_VerifySeesATakeover: Verify is nil while the head is the
// Lease's own, ErrFenced once another owner took the key over, and
// ErrFenced for good after that (docs/protocol.md §24: a parked session of
// a taken key is not revived).
func TestLease_VerifySeesATakeover(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		a, b := mk(Options{}), mk(Options{})
		la, err := a.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := la.Verify(ctx); err != nil {
			t.Fatalf("Verify of a fresh lease: %v", err)
		}
		if _, err := b.Acquire(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if err := la.Verify(ctx); !errors.Is(err, ErrFenced) {
			t.Fatalf("Verify after a takeover: %v, want ErrFenced", err)
		}
		if _, err := a.Publish(ctx, la, nil); !errors.Is(err, ErrFenced) {
			t.Fatalf("Publish after Verify fenced: %v, want ErrFenced", err)
		}
	})
}

// TestCheckKeys_AnotherMasterKeyIsRefusedBeforeTheTakeover: a store whose
// master key opens none of the key's archives gets ErrCorrupt from
// CheckKeys, before any head write; one with the right key (or a key with
// nothing published) gets nil.
func TestCheckKeys_AnotherMasterKeyIsRefusedBeforeTheTakeover(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		src := t.TempDir()
		os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o600)
		good := mk(Options{})
		if err := good.CheckKeys(ctx, "k"); err != nil {
			t.Fatalf("nothing published yet: %v", err)
		}
		l, err := good.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := good.Publish(ctx, l, []Source{{Name: "s", Path: src}}); err != nil {
			t.Fatal(err)
		}
		if err := good.CheckKeys(ctx, "k"); err != nil {
			t.Fatalf("the key that sealed it: %v", err)
		}
		wrong := mk(Options{Key: testKey(t)})
		if err := wrong.CheckKeys(ctx, "k"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("another master key: %v, want ErrCorrupt", err)
		}
		if err := l.Verify(ctx); err != nil {
			t.Fatalf("the owner's lease after the refused check: %v (nothing may have been written)", err)
		}
	})
}

// TestPublish_StrictSourceThroughALinkIsRefused: a Strict source whose
// path is a symlink, or goes through one, fails the publication ErrInvalid
// and publishes nothing; the link's target never reaches the store.
func TestPublish_StrictSourceThroughALinkIsRefused(t *testing.T) {
	ctx := ctxT(t)
	s := mustOpen(t, Options{URL: "file://" + t.TempDir() + "/store"})
	secret, home := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(secret, "s"), []byte("forbidden"), 0o600)
	os.Symlink(secret, filepath.Join(home, "fa"))
	l, err := s.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publish(ctx, l, []Source{{Name: "fa", Path: filepath.Join(home, "fa"), Strict: true}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a Strict source that is a link: %v, want ErrInvalid", err)
	}
	if h := l.Head(); h.Archive != nil {
		t.Fatalf("something was published: %+v", h.Archive)
	}
	// Without Strict the root link is followed (a host's own linked CODEX_HOME).
	if _, err := s.Publish(ctx, l, []Source{{Name: "fa", Path: filepath.Join(home, "fa")}}); err != nil {
		t.Fatalf("a non-Strict linked source: %v", err)
	}
}
