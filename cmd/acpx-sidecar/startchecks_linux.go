package main

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplaceMissing probes dir's filesystem for renameat2
// RENAME_NOREPLACE with two temp files of its own (removed after): "" when
// it works or the probe cannot run (a missing or unwritable dir is
// reported elsewhere), else the errno.
func renameNoReplaceMissing(dir string) string {
	a, err := os.CreateTemp(dir, ".acpx-probe-")
	if err != nil {
		return ""
	}
	a.Close()
	defer os.Remove(a.Name())
	b := a.Name() + "-b"
	defer os.Remove(b)
	err = unix.Renameat2(unix.AT_FDCWD, a.Name(), unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return err.Error()
	}
	return ""
}
