package statestore

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRoundTrip_ByteExactWithModes publishes a directory source and a
// single-file source and restores them into a fresh environment:
// contents, modes, links and empty entries come back byte-exact (PROTOCOL
// §10.2 "Restore": "moves it into place byte-exact with modes"); a file
// the target already holds is kept and listed; a source with no path is
// absent and restores nothing; nothing is left in the scratch parent.
func TestRoundTrip_ByteExactWithModes(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		src := t.TempDir()
		makeTree(t, filepath.Join(src, "home"), sampleTree)
		single := filepath.Join(src, "claude.json")
		if err := os.WriteFile(single, []byte(`{"single":true}`), 0o640); err != nil {
			t.Fatal(err)
		}
		os.Chmod(single, 0o640)
		s := mk(Options{})
		l, err := s.Acquire(ctx, "key/one")
		if err != nil {
			t.Fatal(err)
		}
		if h := l.Head(); h.Generation != 1 || h.Archive != nil || h.Owner != testOwner {
			t.Fatalf("first Acquire head = %+v", h)
		}
		pub, err := s.Publish(ctx, l, []Source{
			{Name: "codex-home", Path: filepath.Join(src, "home")},
			{Name: "claude.json", Path: single},
			{Name: "journal", Path: filepath.Join(src, "no-such")},
		})
		if err != nil {
			t.Fatal(err)
		}
		// 16 tree entries + the root dir + the single file
		if pub.Generation != 2 || pub.Entries != int64(len(sampleTree)+2) || pub.SkippedTotal != 0 || pub.Bytes <= 0 || len(pub.SHA256) != 64 {
			t.Fatalf("publication = %+v", pub)
		}
		head, err := s.ReadHead(ctx, "key/one")
		if err != nil {
			t.Fatal(err)
		}
		if head.Generation != 2 || head.Archive == nil || head.Archive.Object != pub.Object || head.Archive.SHA256 != pub.SHA256 || head.Previous != nil {
			t.Fatalf("head after publish = %+v", head)
		}

		// A second sidecar takes the key over and restores it elsewhere.
		s2 := mk(Options{Key: s.key, Owner: Owner{SidecarID: "sc-2", Hostname: "h2"}})
		l2, err := s2.Acquire(ctx, "key/one")
		if err != nil {
			t.Fatal(err)
		}
		env := t.TempDir()
		target := filepath.Join(env, "new-home", "codex")
		// the host already wrote a config file the archive also has
		if err := os.MkdirAll(filepath.Join(target, "a"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(target, "a", "empty"), []byte("host config"), 0o600); err != nil {
			t.Fatal(err)
		}
		scratch := filepath.Join(env, "scratch")
		os.Mkdir(scratch, 0o700)
		targets := map[string]string{"codex-home": target, "claude.json": filepath.Join(env, "h", ".claude.json"), "journal": filepath.Join(env, "journal")}
		r, err := s2.Restore(ctx, l2, targets, scratch)
		if err != nil {
			t.Fatal(err)
		}
		if r.Generation != 2 || r.Entries != pub.Entries || r.Bytes != pub.Bytes || !slices.Equal(r.Kept, []string{"codex-home/a/empty"}) || r.KeptTotal != 1 {
			t.Fatalf("restored = %+v", r)
		}
		if b, _ := os.ReadFile(filepath.Join(target, "a", "empty")); string(b) != "host config" {
			t.Fatalf("kept file was overwritten: %q", b)
		}
		// put the archived empty file back in the comparison: everything
		// else must be identical
		os.WriteFile(filepath.Join(target, "a", "empty"), nil, 0o644)
		os.Chmod(filepath.Join(target, "a", "empty"), 0o644)
		os.Chmod(filepath.Join(target), 0o755)
		sameTree(t, filepath.Join(src, "home"), target)
		if b, err := os.ReadFile(targets["claude.json"]); err != nil || string(b) != `{"single":true}` {
			t.Fatalf("single file: %q, %v", b, err)
		}
		if st, _ := os.Stat(targets["claude.json"]); st.Mode().Perm() != 0o640 {
			t.Fatalf("single file mode %v", st.Mode())
		}
		if _, err := os.Lstat(targets["journal"]); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("absent source was restored: %v", err)
		}
		if n := listDir(t, scratch); len(n) != 0 {
			t.Fatalf("scratch parent not empty after restore: %v", n)
		}
	})
}

// TestRoundTrip_FreshTargetTakesDirectoryMode restores into a target that
// does not exist: the source root's own mode comes back too, and the
// target's parents are made.
func TestRoundTrip_FreshTargetTakesDirectoryMode(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		src := filepath.Join(t.TempDir(), "home")
		makeTree(t, src, sampleTree)
		os.Chmod(src, 0o711)
		s := mk(Options{})
		l, err := s.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Publish(ctx, l, []Source{{Name: "home", Path: src}}); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(t.TempDir(), "x", "y", "home")
		r, err := s.Restore(ctx, l, map[string]string{"home": target}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kept) != 0 {
			t.Fatalf("kept %v", r.Kept)
		}
		sameTree(t, src, target)
	})
}

// TestRoundTrip_LinkedSourcesAndCrossFilesystemTargets: a source whose own
// path is a symlink (a HOME/.claude.json pointing elsewhere, a linked
// CODEX_HOME) is archived as what it points to, and a restore whose fresh
// directory lies on another filesystem than the target (/dev/shm) copies
// instead of renaming, byte-exact with modes.
func TestRoundTrip_LinkedSourcesAndCrossFilesystemTargets(t *testing.T) {
	ctx := ctxT(t)
	src := t.TempDir()
	real := filepath.Join(src, "real-home")
	makeTree(t, real, sampleTree)
	os.Symlink(real, filepath.Join(src, "home"))
	os.WriteFile(filepath.Join(src, "real.json"), []byte("{}"), 0o600)
	os.Symlink("real.json", filepath.Join(src, "claude.json"))
	s := mustOpen(t, Options{URL: "file://" + t.TempDir()})
	l, _ := s.Acquire(ctx, "k")
	if _, err := s.Publish(ctx, l, []Source{{Name: "home", Path: filepath.Join(src, "home")}, {Name: "claude.json", Path: filepath.Join(src, "claude.json")}}); err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	if shm, err := os.MkdirTemp("/dev/shm", "acpx-restore-test-"); err == nil {
		scratch = shm
		t.Cleanup(func() { os.RemoveAll(shm) })
	} else {
		t.Logf("no /dev/shm (%v): the restore renames instead of copying", err)
	}
	env := t.TempDir()
	targets := map[string]string{"home": filepath.Join(env, "home"), "claude.json": filepath.Join(env, "c.json")}
	if _, err := s.Restore(ctx, l, targets, scratch); err != nil {
		t.Fatal(err)
	}
	sameTree(t, real, targets["home"])
	if b, err := os.ReadFile(targets["claude.json"]); err != nil || string(b) != "{}" {
		t.Fatalf("claude.json: %q %v", b, err)
	}
	if st, _ := os.Lstat(targets["claude.json"]); !st.Mode().IsRegular() {
		t.Fatalf("claude.json restored as %v", st.Mode())
	}
	if n := listDir(t, scratch); len(n) != 0 {
		t.Fatalf("scratch holds %v", n)
	}
}

// TestRoundTrip_LeaveKeepsPatternsOut: a source's Leave patterns keep the
// matching entries out of the archive (unlisted) and nothing else: codex's
// state database, which names its old CODEX_HOME, is rebuilt wherever the
// session moves (docs/agents.md).
func TestRoundTrip_LeaveKeepsPatternsOut(t *testing.T) {
	ctx := ctxT(t)
	src := filepath.Join(t.TempDir(), "codex")
	makeTree(t, src, map[string]node{
		"state_5.sqlite":          {kind: 'f', mode: 0o600, data: "db"},
		"state_5.sqlite-wal":      {kind: 'f', mode: 0o600, data: "wal"},
		"sessions":                {kind: 'd', mode: 0o700},
		"sessions/r.jsonl":        {kind: 'f', mode: 0o600, data: "rollout"},
		"sessions/state_5.sqlite": {kind: 'f', mode: 0o600, data: "deeper: kept"},
	})
	s := mustOpen(t, Options{URL: "file://" + t.TempDir() + "/store"})
	l, err := s.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := s.Publish(ctx, l, []Source{{Name: "codex", Path: src, Leave: []string{"state_*.sqlite", "state_*.sqlite-*"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(pub.Skipped) != 0 {
		t.Errorf("left-out entries listed as skipped: %v", pub.Skipped)
	}
	target := filepath.Join(t.TempDir(), "codex")
	if _, err := s.Restore(ctx, l, map[string]string{"codex": target}, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"state_5.sqlite", "state_5.sqlite-wal"} {
		if _, err := os.Lstat(filepath.Join(target, p)); err == nil {
			t.Errorf("%s was archived despite Leave", p)
		}
	}
	for _, p := range []string{"sessions/r.jsonl", "sessions/state_5.sqlite"} {
		if _, err := os.Lstat(filepath.Join(target, p)); err != nil {
			t.Errorf("%s is missing: %v", p, err)
		}
	}
}
