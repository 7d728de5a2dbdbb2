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
