package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHome_MadeCheckedKeptAndRemovedWithoutFollowingLinks: a key's
// private HOME is made 0700 under homes/, kept (what was written there
// stays across calls), and RemoveHome removes it with a link inside
// removed but its target kept.
func TestHome_MadeCheckedKeptAndRemovedWithoutFollowingLinks(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, err := s.Home("a/key")
	if err != nil {
		t.Fatal(err)
	}
	if home != filepath.Join(s.Dir(), "homes", "a%2Fkey") || home != s.HomePath("a/key") {
		t.Fatalf("home %s", home)
	}
	for _, d := range []string{filepath.Dir(home), home} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want a 0700 directory", d, fi, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(home, ".config", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	keep := filepath.Join(outside, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(home, ".config", "link")); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Home("a/key"); err != nil || again != home {
		t.Fatalf("second Home: %s %v", again, err)
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "x")); err != nil {
		t.Fatalf("the home was not kept: %v", err)
	}
	if err := s.RemoveHome("a/key"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(home); !os.IsNotExist(err) {
		t.Fatalf("home still there: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("a link's target was removed: %v", err)
	}
	if err := s.RemoveHome("a/key"); err != nil {
		t.Fatalf("removing a missing home: %v", err)
	}
}

// TestHome_LinkInPlaceOfHomeIsRefused: homes/<key> planted as a link is
// refused, never followed.
func TestHome_LinkInPlaceOfHomeIsRefused(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.Dir(), "homes"), 0o700); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	if err := os.Symlink(target, s.HomePath("k")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Home("k"); err == nil {
		t.Fatal("a linked home was accepted")
	}
}

// TestOpen_HeldDirectoriesSurviveARenameOfTheirParent: once a store is
// open, its records go to the directories it opened even after their
// parent was renamed and the names recreated by someone else.
func TestOpen_HeldDirectoriesSurviveARenameOfTheirParent(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "parent", "state")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(base, "parent"), filepath.Join(base, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(newRecord("k")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, "moved", "state", "sessions", "k.json")); err != nil {
		t.Errorf("the record is not where the store first opened its sessions/: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sessions", "k.json")); err == nil {
		t.Errorf("the record went to the recreated path")
	}
}

// TestRemoveInHome_RemovesThatDirOnlyAndNeverThroughALink: a directory
// inside the home goes, its siblings stay; a link on the way stops the
// walk, its target untouched.
func TestRemoveInHome_RemovesThatDirOnlyAndNeverThroughALink(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, err := s.Home("k")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".codex/sessions", ".keep"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RemoveInHome("k", ".codex"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, ".codex")); !os.IsNotExist(err) {
		t.Errorf(".codex still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, ".keep")); err != nil {
		t.Errorf("a sibling went too: %v", err)
	}
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(outside, "victim"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(home, "link")); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveInHome("k", "link/victim"); err == nil {
		t.Errorf("a walk through a link succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "victim")); err != nil {
		t.Errorf("the link's target lost a directory: %v", err)
	}
	if err := s.RemoveInHome("k", "../../x"); err == nil {
		t.Errorf("a path out of the home was accepted")
	}
}

// TestHome_DotKeysGetTheirOwnHome: the keys "." and ".." — which
// encodeURIComponent leaves as they are — get a HOME of their own inside
// homes/ (never homes/ itself or the state dir), and removing theirs
// leaves every other key's HOME in place.
func TestHome_DotKeysGetTheirOwnHome(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	victim, err := s.Home("victim")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, ".bashrc"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	homes := filepath.Join(s.Dir(), "homes")
	for key, name := range map[string]string{".": "%2E", "..": "%2E%2E"} {
		home, err := s.Home(key)
		if err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		if home != filepath.Join(homes, name) || home != s.HomePath(key) || filepath.Dir(home) != homes {
			t.Errorf("key %q: home %s (HomePath %s), want %s", key, home, s.HomePath(key), filepath.Join(homes, name))
		}
		if err := s.RemoveHome(key); err != nil {
			t.Fatalf("key %q: RemoveHome: %v", key, err)
		}
		if _, err := os.Stat(filepath.Join(victim, ".bashrc")); err != nil {
			t.Fatalf("removing key %q's HOME removed another key's: %v", key, err)
		}
	}
	if HomeName("%2E") == HomeName(".") || HomeName("a.b") != "a.b" {
		t.Errorf("HomeName: %q %q %q", HomeName("%2E"), HomeName("."), HomeName("a.b"))
	}
}

// TestRemoveEmptyHome_OnlyAnEmptyDirectory: RemoveEmptyHome removes an
// empty private HOME, and leaves one that holds anything, a link in its
// place (and the link's target) and a missing one, without error.
func TestRemoveEmptyHome_OnlyAnEmptyDirectory(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RemoveEmptyHome("k"); ok || err != nil {
		t.Fatalf("no homes/ yet: %v, %v", ok, err)
	}
	home, err := s.Home("k")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RemoveEmptyHome("k"); !ok || err != nil {
		t.Fatalf("an empty HOME: %v, %v; want removed", ok, err)
	}
	if _, err := os.Lstat(home); !os.IsNotExist(err) {
		t.Fatalf("the empty HOME is still there: %v", err)
	}
	if home, err = s.Home("k"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RemoveEmptyHome("k"); ok || err != nil {
		t.Fatalf("a HOME holding a file: %v, %v; want kept", ok, err)
	}
	target := t.TempDir()
	if err := os.Symlink(target, s.HomePath("link")); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RemoveEmptyHome("link"); ok || err != nil {
		t.Fatalf("a link as HOME: %v, %v; want left alone", ok, err)
	}
	if _, err := os.Lstat(s.HomePath("link")); err != nil {
		t.Fatalf("the link was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, "f")); err != nil {
		t.Fatalf("the non-empty HOME lost its file: %v", err)
	}
}
