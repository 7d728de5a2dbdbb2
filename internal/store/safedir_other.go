//go:build !linux

package store

import (
	"errors"

	"golang.org/x/sys/unix"
)

// openBeneath opens name (one component) below dirfd with openat and the
// O_NOFOLLOW the caller passes: where openat2 does not exist that is the
// refusal of a link.
func openBeneath(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// renameNoReplace is unsupported here (errors.ErrUnsupported): a caller
// creates the file instead.
func (d *SafeDir) renameNoReplace(oldName, newName string) error {
	return errors.ErrUnsupported
}
