//go:build linux

package reaper

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BecomeSubreaper makes this process a child subreaper
// (prctl PR_SET_CHILD_SUBREAPER): an orphaned descendant re-parents to it
// instead of to init. The sidecar needs that for its guardians: if one is
// killed while the sidecar lives, the provider tree re-parents to the
// sidecar, which reaps it and keeps containing it (see internal/guardian);
// so NewSupervisor refuses to run in a process that is not one
// (ErrNotSubreaper). It is process-wide and permanent (nothing in this
// package undoes it), and idempotent. cmd/acpx-sidecar calls it right
// before NewSupervisor; a test that makes a Supervisor must call it too.
// The only error is the prctl's (e.g. a kernel without it).
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("reaper: prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	return nil
}

// isSubreaper reports whether this process is a child subreaper
// (prctl PR_GET_CHILD_SUBREAPER).
func isSubreaper() (bool, error) {
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		return false, fmt.Errorf("reaper: prctl(PR_GET_CHILD_SUBREAPER): %w", err)
	}
	return v != 0, nil
}
