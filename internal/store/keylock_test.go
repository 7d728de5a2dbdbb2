package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLockKey_ExclusiveUntilReleased: a second LockKey of the key (another
// open file description, as another sidecar's) is refused with a
// *KeyHeldError naming this pid until the first hold is released; other
// keys are independent; the descriptor is close-on-exec.
func TestLockKey_ExclusiveUntilReleased(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.LockKey("k")
	if err != nil {
		t.Fatal(err)
	}
	flags, err := unix.FcntlInt(l.f.Fd(), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("hold descriptor flags %#x, %v: want FD_CLOEXEC", flags, err)
	}
	_, err = s.LockKey("k")
	var held *KeyHeldError
	if !errors.Is(err, ErrKeyHeld) || !errors.As(err, &held) || held.Pid != os.Getpid() {
		t.Fatalf("second LockKey: %v, want ErrKeyHeld naming pid %d", err, os.Getpid())
	}
	other, err := s.LockKey("other")
	if err != nil {
		t.Fatalf("another key: %v", err)
	}
	other.Release()
	l.Release()
	l.Release() // idempotent
	again, err := s.LockKey("k")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Release()
	if _, err := os.Stat(filepath.Join(s.SessionsDir(), "k"+KeyLockSuffix)); err != nil {
		t.Errorf("hold file: %v", err)
	}
}

// TestKeyLockPath_NeverARecordLock: a key starting with '.' cannot make its
// hold file the record-write lock ".<enc>.lock" of another key, and the
// longest key's hold file name fits NAME_MAX.
func TestKeyLockPath_NeverARecordLock(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, rec := filepath.Base(s.KeyLockPath(".foo")), filepath.Base(s.lockPath("foo")); got == rec || strings.HasSuffix(got, ".lock") {
		t.Errorf("hold file %q vs record lock %q", got, rec)
	}
	long := strings.Repeat("a", MaxEncodedKeyLen)
	if n := len(filepath.Base(s.KeyLockPath(long))); n > 255 {
		t.Errorf("hold file name of the longest key is %d bytes", n)
	}
	l, err := s.LockKey(long)
	if err != nil {
		t.Fatalf("longest key: %v", err)
	}
	l.Release()
}

// TestLockKey_RemoveDeletesOnlyTheHeldFile: Remove deletes the hold file
// and releases the hold; a hold taken on a file that was then removed
// (what another process may have open) does not count: the next LockKey
// locks the file at the path, even while that stale descriptor holds its
// flock; a path that names another file than the held one is left alone.
func TestLockKey_RemoveDeletesOnlyTheHeldFile(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := s.KeyLockPath("k")
	l, err := s.LockKey("k")
	if err != nil {
		t.Fatal(err)
	}
	stale, err := os.Open(path) // another process's open of the same file
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("hold file after Remove: %v", err)
	}
	// The stale descriptor takes its flock of the deleted file: that is
	// no hold of the key.
	if err := unix.Flock(int(stale.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	l2, err := s.LockKey("k")
	if err != nil {
		t.Fatalf("LockKey after the file was removed: %v", err)
	}
	// Replace the path under l2: Remove must not delete the new file.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l2.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("Remove deleted a hold file it did not hold: %v", err)
	}
}
