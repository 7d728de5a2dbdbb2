package store

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2 turned out to be unavailable (ENOSYS: a
// kernel before 5.6, or a seccomp profile that does not know it).
var noOpenat2 atomic.Bool

// openBeneath opens name below dirfd: openat2 with RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS (no link anywhere in the name, nothing outside the
// directory), or, where openat2 is unavailable, openat with the
// O_NOFOLLOW the caller passes (name is one component, so that is the
// same refusal).
func openBeneath(dirfd int, name string, flags int, mode uint32) (int, error) {
	if !noOpenat2.Load() {
		how := unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
		if flags&unix.O_CREAT != 0 {
			how.Mode = uint64(mode) // openat2 refuses a mode without O_CREAT
		}
		for {
			fd, err := unix.Openat2(dirfd, name, &how)
			switch {
			case err == nil:
				return fd, nil
			case errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN):
				continue
			case errors.Is(err, unix.ENOSYS):
				noOpenat2.Store(true)
			default:
				return -1, err
			}
			break
		}
	}
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// renameNoReplace renames oldName to newName within d unless newName
// exists (renameat2 RENAME_NOREPLACE). Errors: fs.ErrExist when it
// exists, errors.ErrUnsupported where the filesystem or kernel has no
// such rename, or the rename's error.
func (d *SafeDir) renameNoReplace(oldName, newName string) error {
	if err := d.name(oldName); err != nil {
		return err
	}
	if err := d.name(newName); err != nil {
		return err
	}
	err := unix.Renameat2(d.fd, oldName, d.fd, newName, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS):
		return errors.ErrUnsupported
	}
	return &os.LinkError{Op: "rename", Old: filepath.Join(d.path, oldName), New: filepath.Join(d.path, newName), Err: err}
}
