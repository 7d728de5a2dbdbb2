package store

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSafeDir_PlantedLinksAreRefusedNothingOutsideIsTouched: a record
// lock, key hold, record or ledger entry planted as a symlink to a file
// outside the state dir is refused with an *UnsafeFileError, and the
// target is neither created nor written (docs/protocol.md §20).
func TestSafeDir_PlantedLinksAreRefusedNothingOutsideIsTouched(t *testing.T) {
	s := openTemp(t)
	outside := t.TempDir()
	plant := func(dir, name string) string {
		target := filepath.Join(outside, name+".target")
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		return target
	}
	targets := []string{
		plant(s.SessionsDir(), ".victim.lock"),
		plant(s.SessionsDir(), FileStem("held", len(KeyLockSuffix))+KeyLockSuffix),
		plant(s.SessionsDir(), EncodeKey("rec")+".json"),
		plant(s.OwnedDir(), "s-1.json"),
	}
	if err := s.Update("victim", func(*Record) error { return nil }); !errors.Is(err, ErrUnsafeFile) {
		t.Errorf("Update through a planted lock link: %v, want ErrUnsafeFile", err)
	}
	if _, err := s.LockKey("held"); !errors.Is(err, ErrUnsafeFile) {
		t.Errorf("LockKey through a planted link: %v, want ErrUnsafeFile", err)
	}
	if _, err := s.Load("rec"); !errors.Is(err, ErrUnsafeFile) {
		t.Errorf("Load of a planted record link: %v, want ErrUnsafeFile", err)
	}
	if owned, err := s.ListOwned(); len(owned) != 0 || !errors.Is(err, ErrUnsafeFile) {
		t.Errorf("ListOwned with a planted link: %v %v", owned, err)
	}
	for _, p := range targets {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was created through a link (%v)", p, err)
		}
	}
	// Saving over a planted record link replaces the link, never writes
	// its target.
	if err := s.Save(newRecord("rec")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(s.RecordPath("rec")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("record after Save: %v %v", fi, err)
	}
}

// TestSafeDir_ForeignOrSharedFilesAreRefused: an existing state-dir file
// owned by another uid, or writable by group or others, is refused; a
// file the sidecar creates gets exactly its mode.
func TestSafeDir_ForeignOrSharedFilesAreRefused(t *testing.T) {
	s := openTemp(t)
	d, err := OpenSafeDir(s.SessionsDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	wide := filepath.Join(s.SessionsDir(), "wide")
	if err := os.WriteFile(wide, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(wide, 0o622)
	if _, err := d.OpenFile("wide", os.O_RDWR|os.O_CREATE, 0o600); !errors.Is(err, ErrUnsafeFile) {
		t.Errorf("group-writable file: %v, want ErrUnsafeFile", err)
	}
	if os.Geteuid() == 0 {
		foreign := filepath.Join(s.SessionsDir(), "foreign")
		if err := os.WriteFile(foreign, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if _, err := d.ReadFile("foreign", 1<<10); !errors.Is(err, ErrUnsafeFile) {
			t.Errorf("file of uid 4242: %v, want ErrUnsafeFile", err)
		}
	}
	old := syscall.Umask(0o077)
	f, err := d.OpenFile("fresh", os.O_RDWR|os.O_CREATE, 0o640)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	assertMode(t, filepath.Join(s.SessionsDir(), "fresh"), 0o640) // the umask undone
	if _, err := d.OpenFile("a/b", os.O_RDONLY, 0); err == nil {
		t.Error("a name with a slash was opened")
	}
}

// TestOpen_RefusesLinkedSessionsDir: sessions/ or owned/ that is a link
// makes the store unusable (never followed).
func TestOpen_RefusesLinkedSessionsDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "sessions")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrUnsafeFile) {
		t.Fatalf("Open with sessions/ a link: %v, want ErrUnsafeFile", err)
	}
}
