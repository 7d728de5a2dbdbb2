package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// A state dir's own directories (the state dir itself, sessions/, owned/
// and homes/) are opened once per process, by Open, and every later
// access goes beneath those handles: OpenSafeDir of one of them hands out
// a duplicate of its handle instead of resolving the path again. So a
// tree that may write a parent of the state dir cannot, by renaming that
// parent and recreating the names, make the sidecar write its records,
// journal or ledger into the tree's own directory (docs/protocol.md §19,
// "Nothing an agent can move"): the handles keep naming the directories
// the sidecar first opened, wherever they are moved.

var held sync.Map // cleaned path → *heldDir

// heldDir is one directory handle kept for the process's life.
type heldDir struct{ fd int }

// holdDir opens dir (a directory, not a link: O_DIRECTORY | O_NOFOLLOW)
// once and keeps the handle; a second call for the same path keeps the
// first handle, unless that directory was removed meanwhile (no link
// left to it: an operator who deleted and recreated the state dir).
// Errors: an *UnsafeFileError for a link, or the open error.
func holdDir(dir string) error {
	dir = filepath.Clean(dir)
	if v, ok := held.Load(dir); ok {
		var st unix.Stat_t
		if unix.Fstat(v.(*heldDir).fd, &st) == nil && st.Nlink > 0 {
			return nil
		}
		held.CompareAndDelete(dir, v) // removed: its handle stays open (a copy may be in use)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) && isLink(dir) {
			return &UnsafeFileError{Path: dir, Reason: "is a symbolic link"}
		}
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	if _, loaded := held.LoadOrStore(dir, &heldDir{fd: fd}); loaded {
		unix.Close(fd)
	}
	return nil
}

// heldFD is a new descriptor (close-on-exec) of dir's kept handle, or -1
// when dir is not held.
func heldFD(dir string) (int, error) {
	v, ok := held.Load(filepath.Clean(dir))
	if !ok {
		return -1, nil
	}
	fd, err := unix.FcntlInt(uintptr(v.(*heldDir).fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("store: dup %s: %w", dir, err)
	}
	return fd, nil
}
