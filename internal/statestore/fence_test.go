package statestore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawHead reads the stored head's bytes (nil if none).
func rawHead(t testing.TB, s *Store, key string) []byte {
	t.Helper()
	kd, err := keyDir(key)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := s.b.getHead(context.Background(), kd+"/head")
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// archives lists the key's archive objects.
func archives(t testing.TB, s *Store, key string) []string {
	t.Helper()
	kd, _ := keyDir(key)
	var ns []string
	if err := s.b.list(context.Background(), kd+"/archives/", func(n string) error { ns = append(ns, n); return nil }); err != nil {
		t.Fatal(err)
	}
	return ns
}

func smallSource(t testing.TB) []Source {
	dir := filepath.Join(t.TempDir(), "home")
	makeTree(t, dir, map[string]node{"f": {kind: 'f', mode: 0o600, data: "state"}})
	return []Source{{Name: "home", Path: dir}}
}

// TestFencing_TakeoverFencesOldOwner: A acquires, B acquires (takes the
// key over): A's Publish fails ErrFenced, B's head is byte-identical
// afterwards, A's lease stays dead, and B publishes fine (PROTOCOL §10.2
// "Fencing": "the publication fails STATE_FENCED ... the new owner's head
// is untouched").
func TestFencing_TakeoverFencesOldOwner(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		key := testKey(t)
		a := mk(Options{Key: key, Owner: Owner{SidecarID: "A", Hostname: "ha"}})
		b := mk(Options{Key: key, Owner: Owner{SidecarID: "B", Hostname: "hb"}})
		src := smallSource(t)
		la, err := a.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Publish(ctx, la, src); err != nil {
			t.Fatal(err)
		}
		lb, err := b.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if h := lb.Head(); h.Generation != 3 || h.Owner.SidecarID != "B" || h.Archive == nil {
			t.Fatalf("B's head after takeover = %+v", h)
		}
		before := rawHead(t, b, "k")
		nArch := len(archives(t, b, "k"))
		if _, err := a.Publish(ctx, la, src); !errors.Is(err, ErrFenced) {
			t.Fatalf("A's Publish after takeover: %v, want ErrFenced", err)
		}
		if after := rawHead(t, b, "k"); !bytes.Equal(before, after) {
			t.Fatalf("B's head changed:\n%s\n%s", before, after)
		}
		if n := len(archives(t, b, "k")); n != nArch {
			t.Fatalf("A's fenced publication left an archive: %d, want %d", n, nArch)
		}
		if _, err := a.Publish(ctx, la, src); !errors.Is(err, ErrFenced) {
			t.Fatalf("A's second Publish: %v, want ErrFenced (dead lease)", err)
		}
		if err := a.Discard(ctx, la); !errors.Is(err, ErrFenced) {
			t.Fatalf("A's Discard: %v, want ErrFenced", err)
		}
		pub, err := b.Publish(ctx, lb, src)
		if err != nil {
			t.Fatal(err)
		}
		if pub.Generation != 4 {
			t.Fatalf("B's publication generation %d, want 4", pub.Generation)
		}
		h, _ := b.ReadHead(ctx, "k")
		if h.Owner.SidecarID != "B" || h.Previous == nil || h.Previous.Generation != 2 {
			t.Fatalf("head = %+v", h)
		}
	})
}

// TestRetention_KeepsHeadAndPrevious: after several publications only the
// head's archive and its previous remain (PROTOCOL §10.2 "Retention").
func TestRetention_KeepsHeadAndPrevious(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		s := mk(Options{})
		l, err := s.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		src := smallSource(t)
		for range 4 {
			if _, err := s.Publish(ctx, l, src); err != nil {
				t.Fatal(err)
			}
		}
		h := l.Head()
		got := archives(t, s, "k")
		want := []string{h.Previous.Object, h.Archive.Object}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("archives after 4 publications: %v, want %v", got, want)
		}
	})
}

// TestDiscard_DeletesEveryObject: Discard removes the head and every
// archive of the key (PROTOCOL §10.2 `discardPersistentState`), and the
// lease is over; a later Acquire starts again at generation 1.
func TestDiscard_DeletesEveryObject(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		s := mk(Options{})
		l, err := s.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		src := smallSource(t)
		for range 2 {
			if _, err := s.Publish(ctx, l, src); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Discard(ctx, l); err != nil {
			t.Fatal(err)
		}
		if h := rawHead(t, s, "k"); h != nil {
			t.Fatalf("head left: %s", h)
		}
		if a := archives(t, s, "k"); len(a) != 0 {
			t.Fatalf("archives left: %v", a)
		}
		if _, err := s.ReadHead(ctx, "k"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ReadHead after Discard: %v", err)
		}
		if _, err := s.Publish(ctx, l, src); !errors.Is(err, ErrFenced) {
			t.Fatalf("Publish after Discard: %v", err)
		}
		if fb, ok := s.b.(*fileBackend); ok {
			if n := listDir(t, filepath.Join(fb.root, "keys")); len(n) != 0 {
				t.Fatalf("file store keeps %v after Discard", n)
			}
		}
		l2, err := s.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if l2.Head().Generation != 1 {
			t.Fatalf("generation after discard: %d", l2.Head().Generation)
		}
	})
}

// TestDiscard_FencedDeletesNothing: a Discard by a fenced owner deletes
// nothing of the new owner's.
func TestDiscard_FencedDeletesNothing(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		key := testKey(t)
		a, b := mk(Options{Key: key}), mk(Options{Key: key, Owner: Owner{SidecarID: "B"}})
		la, _ := a.Acquire(ctx, "k")
		if _, err := a.Publish(ctx, la, smallSource(t)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Acquire(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		before, nArch := rawHead(t, b, "k"), len(archives(t, b, "k"))
		if err := a.Discard(ctx, la); !errors.Is(err, ErrFenced) {
			t.Fatalf("fenced Discard: %v", err)
		}
		if !bytes.Equal(before, rawHead(t, b, "k")) || len(archives(t, b, "k")) != nArch {
			t.Fatal("a fenced Discard changed the new owner's objects")
		}
	})
}

// TestFileStore_LayoutMirrorsS3Names: the file store keeps objects under
// their S3 names (keys/<enc>/head, keys/<enc>/archives/<gen>-<hex>), 0700
// directories and 0600 files, and a session key of dots cannot climb out.
func TestFileStore_LayoutMirrorsS3Names(t *testing.T) {
	ctx := ctxT(t)
	root := filepath.Join(t.TempDir(), "store")
	s := mustOpen(t, Options{URL: "file://" + root})
	for _, k := range []string{"..", ".", "a/../b"} {
		l, err := s.Acquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Publish(ctx, l, smallSource(t)); err != nil {
			t.Fatal(err)
		}
	}
	got := listDir(t, filepath.Join(root, "keys"))
	want := []string{"%2E", "%2E%2E", "a%2F%2E%2E%2Fb"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("keys/ holds %v, want %v", got, want)
	}
	if n := listDir(t, root); strings.Join(n, ",") != "keys" {
		t.Fatalf("store root holds %v", n)
	}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if p != root && fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	a := archives(t, s, "..")
	if len(a) != 1 || !strings.HasPrefix(a[0], "keys/%2E%2E/archives/2-") {
		t.Fatalf("archives of '..': %v", a)
	}
}

// TestAcquire_HeadMovedMeanwhileIsReadAgain: when another sidecar takes
// the key between Acquire's read and its conditional write, the write
// fails its condition and Acquire reads the head again and takes it on
// top (PROTOCOL §10.2 "Fencing"): generations 1 (A), 2 (B), 3 (A).
func TestAcquire_HeadMovedMeanwhileIsReadAgain(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		key := testKey(t)
		a, b := mk(Options{Key: key}), mk(Options{Key: key, Owner: Owner{SidecarID: "B"}})
		if _, err := a.Acquire(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		reads := 0
		testHookAcquireRead = func() {
			reads++
			if reads == 1 {
				testHookAcquireRead = nil
				if _, err := b.Acquire(ctx, "k"); err != nil {
					t.Error(err)
				}
				testHookAcquireRead = func() { reads++ }
			}
		}
		defer func() { testHookAcquireRead = nil }()
		l, err := a.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if h := l.Head(); h.Generation != 3 || h.Owner != testOwner || reads != 2 {
			t.Fatalf("head %+v after %d reads, want generation 3 (A 1, B 2, A 3) after 2", h, reads)
		}
		if h, _ := a.ReadHead(ctx, "k"); h.Generation != 3 || h.Owner != testOwner {
			t.Fatalf("stored head %+v", h)
		}
	})
}

// TestRestore_HeadWithoutArchiveRestoresNothing: a key never published
// restores nothing, without error.
func TestRestore_HeadWithoutArchiveRestoresNothing(t *testing.T) {
	ctx := ctxT(t)
	s := mustOpen(t, Options{URL: "file://" + t.TempDir()})
	l, _ := s.Acquire(ctx, "k")
	env := t.TempDir()
	r, err := s.Restore(ctx, l, map[string]string{"home": filepath.Join(env, "home")}, env)
	if err != nil || r.Generation != 0 || r.Entries != 0 || len(listDir(t, env)) != 0 {
		t.Fatalf("Restore of an empty head: %+v, %v", r, err)
	}
}

// TestFileStore_FailedHeadWriteKeepsTheHead: a file:// head write that
// fails before its rename (an I/O error) leaves the previous head, the
// publication is ErrUnavailable with its archive removed, and the next
// Publish succeeds on the same lease.
func TestFileStore_FailedHeadWriteKeepsTheHead(t *testing.T) {
	ctx := ctxT(t)
	s := mustOpen(t, Options{URL: "file://" + t.TempDir()})
	l, _ := s.Acquire(ctx, "k")
	src := smallSource(t)
	if _, err := s.Publish(ctx, l, src); err != nil {
		t.Fatal(err)
	}
	before := rawHead(t, s, "k")
	testHookFileBeforeRename = func(string) error { return errors.New("injected I/O error") }
	_, err := s.Publish(ctx, l, src)
	testHookFileBeforeRename = nil
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Publish with a failing head write: %v, want ErrUnavailable", err)
	}
	if !bytes.Equal(before, rawHead(t, s, "k")) {
		t.Fatal("head changed")
	}
	if n := len(archives(t, s, "k")); n != 1 {
		t.Fatalf("%d archives, want the head's only", n)
	}
	kd, _ := keyDir("k")
	for _, n := range listDir(t, filepath.Join(s.b.(*fileBackend).root, kd)) {
		if strings.HasPrefix(n, ".tmp-") {
			t.Fatalf("temp file %s left", n)
		}
	}
	if _, err := s.Publish(ctx, l, src); err != nil {
		t.Fatalf("next Publish: %v", err)
	}
}

// TestFileStore_StaleTempObjectsAreSwept: a temp object a killed sidecar
// left in a key's archives (unmodified for an hour) is removed at the
// key's next publication; a fresh one, still being written, is kept.
func TestFileStore_StaleTempObjectsAreSwept(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "archives")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	stale, fresh := filepath.Join(sub, ".tmp-111"), filepath.Join(sub, ".tmp-222")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * staleTempAge)
	if err := os.Chtimes(stale, past, past); err != nil {
		t.Fatal(err)
	}
	f := &fileBackend{root: dir}
	w, err := f.newObject(context.Background(), "archives/1-x")
	if err != nil {
		t.Fatal(err)
	}
	w.(*fileObject).f.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale temp object is kept (%v)", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh temp object was removed: %v", err)
	}
}
