package e2e

import (
	"errors"

	"golang.org/x/sys/unix"
)

// fionread is <sys/filio.h> FIONREAD, _IOR('f', 127, int); x/sys/unix has
// no name for it on Darwin. (The e2e suite is compiled and vetted for
// darwin by make test, and run on Linux only.)
const fionread = 0x4004667f

// pipeBytes is how many bytes wait unread in the pipe fd (FIONREAD).
func pipeBytes(fd int) (int, error) { return unix.IoctlGetInt(fd, fionread) }

// mountTmpfs fails: the full-filesystem tests mount a Linux tmpfs.
func mountTmpfs(string, string) error { return errors.New("no tmpfs on darwin") }

// unmountTmpfs is never reached on darwin (mountTmpfs fails).
func unmountTmpfs(string) error { return nil }
