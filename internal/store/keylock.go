package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
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
// crashed sidecar never leaves a stale hold. The hold file is empty but
// for the holder's pid. Its holder may delete it (Remove) when the key has
// nothing left on disk: LockKey, after its flock, checks that the path
// still names the file it locked and starts over if not, so a hold taken
// on a file being deleted is never mistaken for the key's.
type KeyLock struct {
	f    *os.File
	dir  string // the sessions directory
	name string // the hold file's name in dir
}

// maxLockRetries bounds LockKey's start-overs when the hold file is
// deleted under it (each start-over means another holder removed it).
const maxLockRetries = 16

// LockKey takes key's hold without waiting. Errors: ErrKeyHeld when another open file
// description holds it (a *KeyHeldError; a flock conflicts between two
// opens of one process too); ErrInvalidKey; or the open/flock error.
func (s *Store) LockKey(key string) (*KeyLock, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	p := s.KeyLockPath(key)
	name := filepath.Base(p)
	d, err := OpenSafeDir(s.sessions)
	if err != nil {
		return nil, fmt.Errorf("store: key lock: %w", err)
	}
	defer d.Close()
	for try := 0; ; try++ {
		f, err := s.openOrCreate(d, name)
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
		if !namesHeld(d, name, fd) {
			f.Close() // a holder removed it meanwhile: lock the file there now
			if try < maxLockRetries {
				continue
			}
			return nil, fmt.Errorf("store: key lock: %s kept being replaced", p)
		}
		// The holder's pid, for the refusal's message only: best effort.
		if unix.Ftruncate(fd, 0) == nil {
			_, _ = unix.Pwrite(fd, []byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		return &KeyLock{f: f, dir: s.sessions, name: name}, nil
	}
}

// namesHeld reports whether name in d is the file open as fd.
func namesHeld(d *SafeDir, name string, fd int) bool {
	var held unix.Stat_t
	if unix.Fstat(fd, &held) != nil {
		return false
	}
	named, err := d.Lstat(name)
	return err == nil && held.Dev == named.Dev && held.Ino == named.Ino
}

// Remove deletes the hold file while holding it, then releases the hold:
// for a key that has nothing left on disk (no record, no journal), so
// refused opens and discarded keys leave no file behind. A path that no
// longer names the held file is left alone. It is idempotent; errors are
// the unlink's.
func (l *KeyLock) Remove() error {
	if l == nil || l.f == nil {
		return nil
	}
	defer l.Release()
	return withDir(l.dir, func(d *SafeDir) error {
		if !namesHeld(d, l.name, int(l.f.Fd())) {
			return nil
		}
		if err := d.Remove(l.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
}

// KeyHeldError is LockKey's refusal: Pid is the pid the holder wrote
// into the hold file (0 if it could not be read). It matches ErrKeyHeld
// with errors.Is.
type KeyHeldError struct {
	// Pid is the holder's pid as read from the hold file (0: unreadable).
	Pid int
}

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
