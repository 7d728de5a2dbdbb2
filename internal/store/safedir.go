package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// State-dir files are never followed through a link (docs/protocol.md §20,
// docs/operations.md "Threat model"): an agent that can write the state
// dir (no sandbox, same uid) could otherwise plant `sessions/.key.lock` or
// `sessions/<key>.journal.ndjson` as a symlink and make the sidecar create
// or append to a file anywhere. Every file under <stateDir>/sessions and
// <stateDir>/owned is opened through a SafeDir: one component below a
// directory opened without following a link (O_NOFOLLOW | O_DIRECTORY),
// with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) where the kernel has
// it (O_NOFOLLOW else); a file is created exclusively (O_CREAT | O_EXCL)
// or, when it exists, checked on its descriptor: a regular file owned by
// the sidecar's uid and writable by nobody else, else refused with an
// *UnsafeFileError and never used.

// ErrUnsafeFile is matched (errors.Is) by every *UnsafeFileError.
var ErrUnsafeFile = errors.New("store: unsafe file in the state directory")

// UnsafeFileError is a state-dir file refused: Path and why ("is a
// symbolic link", "is owned by uid N", "is writable by group or others",
// "is not a regular file").
type UnsafeFileError struct {
	// Path is the refused file's path.
	Path string
	// Reason says why it was refused, e.g. "is a symbolic link".
	Reason string
}

// Error implements error.
func (e *UnsafeFileError) Error() string {
	return "store: " + e.Path + " " + e.Reason + ": refused (a state-dir file is never followed through a link or used when someone else could have written it)"
}

// Is makes errors.Is(err, ErrUnsafeFile) true.
func (e *UnsafeFileError) Is(target error) bool { return target == ErrUnsafeFile }

// SafeDir is an open state-dir directory (sessions/ or owned/). Its
// methods take one path component (no '/'). Close it when done.
type SafeDir struct {
	path string
	fd   int
}

// OpenSafeDir opens dir, which must be a directory and not itself a link
// (its parents may be) — or, for a state dir's own directory that Open
// already opened (held.go), duplicates that handle without resolving the
// path again. Errors: an *UnsafeFileError for a link, or the open error
// (wrapping fs.ErrNotExist for a missing dir).
func OpenSafeDir(dir string) (*SafeDir, error) {
	if fd, err := heldFD(dir); err != nil || fd >= 0 {
		if err != nil {
			return nil, err
		}
		return &SafeDir{path: dir, fd: fd}, nil
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) && isLink(dir) {
			return nil, &UnsafeFileError{Path: dir, Reason: "is a symbolic link"}
		}
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &SafeDir{path: dir, fd: fd}, nil
}

func isLink(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}

// Path returns the directory's path.
func (d *SafeDir) Path() string { return d.path }

// Close closes the directory.
func (d *SafeDir) Close() error { return unix.Close(d.fd) }

func (d *SafeDir) name(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("store: %q is not one file name", name)
	}
	return nil
}

// OpenFile opens name in d with flag (os.O_* flags; O_NOFOLLOW and
// O_CLOEXEC are always added) and perm for a file it creates. With
// O_CREATE and without O_EXCL an existing file is opened instead, and
// checked; a file it creates gets exactly perm. Errors: *UnsafeFileError
// (a link, another owner, group/other write, not a regular file), or the
// open error (fs.ErrNotExist, fs.ErrExist for O_EXCL).
func (d *SafeDir) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if err := d.name(name); err != nil {
		return nil, err
	}
	p := filepath.Join(d.path, name)
	if flag&os.O_CREATE != 0 && flag&os.O_EXCL == 0 {
		for i := 0; ; i++ {
			f, err := d.OpenFile(name, flag|os.O_EXCL, perm)
			if !errors.Is(err, os.ErrExist) {
				return f, err
			}
			// It exists: open it as it is, then check it; if it was
			// removed meanwhile, create it again.
			f, err = d.OpenFile(name, flag&^os.O_CREATE, perm)
			if !errors.Is(err, os.ErrNotExist) || i >= 100 {
				return f, err
			}
		}
	}
	fd, err := openBeneath(d.fd, name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, &UnsafeFileError{Path: p, Reason: "is a symbolic link"}
		}
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	if flag&os.O_CREATE != 0 {
		if err := unix.Fchmod(fd, uint32(perm.Perm())); err != nil { // undo the umask
			unix.Close(fd)
			return nil, &os.PathError{Op: "chmod", Path: p, Err: err}
		}
	} else if err := checkFD(fd, p); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

// checkFD refuses an opened file that is not a regular file owned by this
// process's effective uid and unwritable by group and others.
func checkFD(fd int, p string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: p, Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return &UnsafeFileError{Path: p, Reason: "is not a regular file"}
	case int(st.Uid) != os.Geteuid():
		return &UnsafeFileError{Path: p, Reason: fmt.Sprintf("is owned by uid %d, not %d", st.Uid, os.Geteuid())}
	case st.Mode&0o022 != 0:
		return &UnsafeFileError{Path: p, Reason: fmt.Sprintf("is writable by group or others (mode %#o)", st.Mode&0o777)}
	}
	return nil
}

// ReadFile reads name in d (OpenFile's checks) if it holds at most max
// bytes. Errors: OpenFile's, or ErrCorrupt wrapped for a larger file
// (never read).
func (d *SafeDir) ReadFile(name string, max int64) ([]byte, error) {
	f, err := d.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %s has %d bytes, more than %d: not read", ErrCorrupt, f.Name(), fi.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s grew past %d bytes: not read", ErrCorrupt, f.Name(), max)
	}
	return b, err
}

// CreateTemp creates a new file ".tmp-<random>" in d exclusively, mode
// 0600, and returns it with its name.
func (d *SafeDir) CreateTemp() (*os.File, string, error) {
	for i := 0; ; i++ {
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := ".tmp-" + hex.EncodeToString(b[:])
		f, err := d.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
		if errors.Is(err, os.ErrExist) && i < 8 {
			continue
		}
		return f, name, err
	}
}

// Rename renames oldName to newName within d (a link at newName is
// replaced, never followed).
func (d *SafeDir) Rename(oldName, newName string) error {
	if err := d.name(oldName); err != nil {
		return err
	}
	if err := d.name(newName); err != nil {
		return err
	}
	if err := unix.Renameat(d.fd, oldName, d.fd, newName); err != nil {
		return &os.LinkError{Op: "rename", Old: filepath.Join(d.path, oldName), New: filepath.Join(d.path, newName), Err: err}
	}
	return nil
}

// Remove unlinks name in d (a link itself, never its target). Errors wrap
// fs.ErrNotExist for a missing name.
func (d *SafeDir) Remove(name string) error {
	if err := d.name(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd, name, 0); err != nil {
		return &os.PathError{Op: "remove", Path: filepath.Join(d.path, name), Err: err}
	}
	return nil
}

// Sync fsyncs the directory.
func (d *SafeDir) Sync() error {
	if err := unix.Fsync(d.fd); err != nil {
		return &os.PathError{Op: "fsync", Path: d.path, Err: err}
	}
	return nil
}

// Lstat stats name in d without following a link.
func (d *SafeDir) Lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := d.name(name); err != nil {
		return st, err
	}
	err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return st, &os.PathError{Op: "lstat", Path: filepath.Join(d.path, name), Err: err}
	}
	return st, nil
}

// withDir runs fn with dir opened as a SafeDir.
func withDir(dir string, fn func(d *SafeDir) error) error {
	d, err := OpenSafeDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(d)
}
