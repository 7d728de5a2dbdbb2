package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrKeyHeld is returned by LockKey when another open file description —
// in practice another sidecar process on the same stateDir — holds the
// key's lock (docs/protocol.md §8 session/open, SESSION_KEY_IN_USE).
var ErrKeyHeld = errors.New("store: session key held by another sidecar")

// KeyLockSuffix ends the name of a session key's hold file,
// <sessions>/<stem>.keylock. It does not end in ".lock", so it can never
// name the record-write lock ".<EncodeKey(key)>.lock" of another key (a
// key may start with '.').
const KeyLockSuffix = ".keylock"

// FileStem is the file-name stem for key's files that end in a suffix of
// suffixLen bytes: EncodeKey(key) when the whole name fits NAME_MAX (255
// bytes), else its first 200 bytes, "%h" and the hex of the first 16 bytes
// of the key's SHA-256 (128 bits). "%h" never occurs in
// encodeURIComponent's output, so the long form cannot name another key's
// file. internal/journal uses the same rule for its segments
// (docs/protocol.md §16).
func FileStem(key string, suffixLen int) string {
	enc := EncodeKey(key)
	if len(enc)+suffixLen <= 255 {
		return enc
	}
	sum := sha256.Sum256([]byte(key))
	return enc[:200] + "%h" + hex.EncodeToString(sum[:16])
}

// KeyLockPath is the path of key's hold file:
// <stateDir>/sessions/<FileStem(key)>.keylock.
func (s *Store) KeyLockPath(key string) string {
	return filepath.Join(s.sessions, FileStem(key, len(KeyLockSuffix))+KeyLockSuffix)
}

// KeyLock is the hold of one session key across processes: an exclusive,
// non-blocking flock(2) on the key's hold file, kept for a session's whole
// life (docs/protocol.md §8 session/open; docs/operations.md, "Sharing a
// stateDir"). The descriptor is close-on-exec, so no provider inherits
// it, and the kernel drops the lock when the holding process dies, so a
// crashed sidecar never leaves a stale hold. The hold file is never
// deleted (unlinking a lock file others may be locking races them); it is
// empty but for the holder's pid.
type KeyLock struct {
	f *os.File
}

// LockKey takes key's hold without waiting. Errors: ErrKeyHeld when another open file
// description holds it (a *KeyHeldError; a flock conflicts between two
// opens of one process too); ErrInvalidKey; or the open/flock error.
func (s *Store) LockKey(key string) (*KeyLock, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	p := s.KeyLockPath(key)
	var f *os.File
	err := withDir(s.sessions, func(d *SafeDir) (err error) {
		f, err = d.OpenFile(filepath.Base(p), os.O_RDWR|os.O_CREATE, fileMode)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: key lock: %w", err)
	}
	fd := int(f.Fd())
	for {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		var holder [32]byte
		n, _ := unix.Pread(fd, holder[:], 0)
		f.Close()
		if err == unix.EWOULDBLOCK {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(holder[:max(n, 0)])))
			return nil, &KeyHeldError{Pid: max(pid, 0)}
		}
		return nil, fmt.Errorf("store: key lock: %w", &os.PathError{Op: "flock", Path: p, Err: err})
	}
	// The holder's pid, for the refusal's message only: best effort.
	if unix.Ftruncate(fd, 0) == nil {
		_, _ = unix.Pwrite(fd, []byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &KeyLock{f: f}, nil
}

// KeyHeldError is LockKey's refusal: Pid is the pid the holder wrote
// into the hold file (0 if it could not be read). It matches ErrKeyHeld
// with errors.Is.
type KeyHeldError struct{ Pid int }

// Error implements error.
func (e *KeyHeldError) Error() string {
	if e.Pid > 0 {
		return ErrKeyHeld.Error() + " (pid " + strconv.Itoa(e.Pid) + ")"
	}
	return ErrKeyHeld.Error()
}

// Is makes errors.Is(err, ErrKeyHeld) true.
func (e *KeyHeldError) Is(target error) bool { return target == ErrKeyHeld }

// Release drops the hold (closing the descriptor releases the flock). It
// is idempotent.
func (l *KeyLock) Release() {
	if l != nil && l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}
