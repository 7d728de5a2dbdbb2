package statestore

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
)

// damagedCopy plants a copy of ref's object with one byte flipped, as a
// new archive of l's key for the same generation.
func damagedCopy(t *testing.T, s *Store, l *Lease, ref ArchiveRef) ArchiveRef {
	t.Helper()
	b := objectBytes(t, s, ref.Object)
	b[len(b)/2] ^= 1
	return plant(t, s, l, ref.Generation, b)
}

func always(Head) bool { return true }

// TestAcquireRestore_BadArchiveLeavesTheHeadAndItsOwner (docs/protocol.md
// §24): a takeover whose archive and previous are both bad fails
// ErrCorrupt before it writes the head — the head's bytes are unchanged,
// nothing is placed, no scratch is left — and the owner publishes on.
// With only the newest bad, the previous is restored (FellBack names the
// newest's generation) and only then is the head moved to the new owner.
func TestAcquireRestore_BadArchiveLeavesTheHeadAndItsOwner(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		key := testKey(t)
		a, b := mk(Options{Key: key}), mk(Options{Key: key, Owner: Owner{SidecarID: "B", Hostname: "hb"}})
		src := smallSource(t)
		la, err := a.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Publish(ctx, la, src); err != nil {
			t.Fatal(err)
		}
		good := *la.Head().Archive
		bad := damagedCopy(t, a, la, good)
		setHead(t, a, la, &bad, &bad)
		before := rawHead(t, a, "k")
		env, scratch := t.TempDir(), t.TempDir()
		targets := map[string]string{"home": filepath.Join(env, "home")}
		lb, r, err := b.AcquireRestore(ctx, "k", always, targets, scratch)
		if !errors.Is(err, ErrCorrupt) || lb != nil || r.Generation != 0 {
			t.Fatalf("AcquireRestore over bad archives: %v, %+v, %v; want ErrCorrupt", lb, r, err)
		}
		if !bytes.Equal(before, rawHead(t, a, "k")) {
			t.Fatalf("the head changed:\n%s\n%s", before, rawHead(t, a, "k"))
		}
		if n := append(listDir(t, env), listDir(t, scratch)...); len(n) != 0 {
			t.Fatalf("left %v", n)
		}
		if _, err := a.Publish(ctx, la, src); err != nil {
			t.Fatalf("the owner's publication after the refused takeover: %v", err)
		}

		good = *la.Head().Archive
		bad = damagedCopy(t, a, la, good)
		setHead(t, a, la, &bad, &good)
		lb, r, err = b.AcquireRestore(ctx, "k", always, targets, scratch)
		if err != nil || r.Generation != good.Generation || r.FellBack == nil || r.FellBack.Generation != bad.Generation || r.FellBack.Reason == "" {
			t.Fatalf("AcquireRestore over a bad newest: %+v, %v; want generation %d, fellBack %d", r, err, good.Generation, bad.Generation)
		}
		sameTree(t, src[0].Path, targets["home"])
		if h := lb.Head(); h.Owner.SidecarID != "B" || h.Generation != la.Head().Generation+1 {
			t.Fatalf("B's head %+v", h)
		}
		if _, err := a.Publish(ctx, la, src); !errors.Is(err, ErrFenced) {
			t.Fatalf("the old owner's publication after the takeover: %v, want ErrFenced", err)
		}
		if n := listDir(t, scratch); len(n) != 0 {
			t.Fatalf("scratch left %v", n)
		}
	})
}

// TestAcquireRestore_HeadMovedWhileVerifyingIsVerifiedAgain: the owner
// publishes between the takeover's read and its conditional write; the
// write fails its condition, the head is read again and its new archive
// verified and restored — never the one the takeover first read.
func TestAcquireRestore_HeadMovedWhileVerifyingIsVerifiedAgain(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		key := testKey(t)
		a, b := mk(Options{Key: key}), mk(Options{Key: key, Owner: Owner{SidecarID: "B"}})
		la, _ := a.Acquire(ctx, "k")
		first := smallSource(t)
		if _, err := a.Publish(ctx, la, first); err != nil {
			t.Fatal(err)
		}
		second := filepath.Join(t.TempDir(), "home")
		makeTree(t, second, map[string]node{"f": {kind: 'f', mode: 0o600, data: "newer state"}})
		reads := 0
		testHookAcquireRead = func() {
			if reads++; reads == 1 {
				if _, err := a.Publish(ctx, la, []Source{{Name: "home", Path: second}}); err != nil {
					t.Error(err)
				}
			}
		}
		defer func() { testHookAcquireRead = nil }()
		target := filepath.Join(t.TempDir(), "home")
		lb, r, err := b.AcquireRestore(ctx, "k", always, map[string]string{"home": target}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if want := la.Head().Archive.Generation; r.Generation != want || reads != 2 || r.FellBack != nil {
			t.Fatalf("restored %+v after %d reads; want generation %d after 2", r, reads, want)
		}
		sameTree(t, second, target)
		if h := lb.Head(); h.Generation != la.Head().Generation+1 {
			t.Fatalf("B's head %+v", h)
		}
	})
}

// TestAcquireRestore_NothingToRestore: need false (the local copy is
// current) or a head without archive takes the key over and restores
// nothing; a bad target is refused before anything.
func TestAcquireRestore_NothingToRestore(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		s := mk(Options{})
		env := t.TempDir()
		targets := map[string]string{"home": filepath.Join(env, "home")}
		l, r, err := s.AcquireRestore(ctx, "k", always, targets, env)
		if err != nil || r.Generation != 0 || l.Head().Generation != 1 {
			t.Fatalf("a new key: %+v, %v", r, err)
		}
		if _, err := s.Publish(ctx, l, smallSource(t)); err != nil {
			t.Fatal(err)
		}
		asked := 0
		l, r, err = s.AcquireRestore(ctx, "k", func(h Head) bool { asked++; return false }, targets, env)
		if err != nil || r.Generation != 0 || asked != 1 || l.Head().Generation != 3 || len(listDir(t, env)) != 0 {
			t.Fatalf("local copy current: %+v, %v, asked %d", r, err, asked)
		}
		if _, _, err := s.AcquireRestore(ctx, "k", always, map[string]string{"home": "relative"}, env); !errors.Is(err, ErrInvalid) {
			t.Fatalf("a relative target: %v, want ErrInvalid", err)
		}
		if h, _ := s.ReadHead(ctx, "k"); h.Generation != 3 {
			t.Fatalf("a refused target moved the head: %+v", h)
		}
	})
}
