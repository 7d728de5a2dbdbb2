//go:build unix

// Package fdexec starts a program named by one of this process's open
// file descriptors (/proc/self/fd/N on Linux, /dev/fd/N on Darwin) with
// syscall.ForkExec, which on its own may hand the child another file under
// that name.
//
// The hazard (Go's syscall/exec_linux.go and exec_libc2.go,
// forkAndExecInChild, "Pass 1"): before the child moves attr.Files onto
// 0..len-1, it moves its error pipe, and every entry whose number is below
// its index, to the numbers just above the highest entry of attr.Files,
// with dup3, closing whatever was open there in the child. A descriptor
// the path names that is not itself in attr.Files and sits on one of those
// numbers is replaced by the error pipe before execve resolves the path,
// which then fails EACCES (a pipe is not executable). Which number a
// descriptor gets depends on what else the process has open, so the
// failure is rare and timing-dependent: an e2e run saw one provider in a
// few thousand fail to start with "permission denied".
package fdexec

import (
	"errors"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// fdPrefixes are the names of this process's descriptors.
var fdPrefixes = []string{"/proc/self/fd/", "/dev/fd/"}

// ForkExec is syscall.ForkExec(path, argv, attr), but when path names a
// descriptor of this process (/proc/self/fd/N or /dev/fd/N, N at least
// len(attr.Files): a lower N names the child's attr.Files[N]) that is not
// among attr.Files, the descriptor is first duplicated (close-on-exec) to
// a number above every one the child's descriptor shuffle can write, and
// the child executes the duplicate; the duplicate is closed on return.
// It returns the child's pid and ForkExec's error, or the fcntl error of
// the duplication (nothing was forked then).
func ForkExec(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	safe, closeDup, err := safePath(path, attr)
	if err != nil {
		return 0, err
	}
	defer closeDup()
	return syscall.ForkExec(safe, argv, attr)
}

// safePath returns the path ForkExec executes for path under attr (path
// itself unless it names a descriptor at risk, see ForkExec) and the
// function that closes the duplicate it made (a no-op when none); call it
// after the fork. The error is the fcntl(F_DUPFD_CLOEXEC) error, or
// EMFILE when the descriptor limit leaves no free number out of reach.
func safePath(path string, attr *syscall.ProcAttr) (string, func(), error) {
	none := func() {}
	fd, prefix := -1, ""
	for _, p := range fdPrefixes {
		if rest, ok := strings.CutPrefix(path, p); ok {
			if n, err := strconv.Atoi(rest); err == nil && n >= 0 {
				fd, prefix = n, p
			}
		}
	}
	if fd < len(attr.Files) {
		// Not a descriptor of this process: the child's own (fd 3 for a
		// script its interpreter opens by name), which is attr.Files[fd].
		return path, none, nil
	}
	// The child's shuffle writes 0..len(Files)-1 and, from the number
	// above the highest entry (at least len(Files)), at most one number
	// per entry plus one for its error pipe (plus one for the id-mapping
	// pipe some platforms add): staying above max+len+3 is out of reach.
	highest := len(attr.Files)
	for _, f := range attr.Files {
		if f == uintptr(fd) {
			return path, none, nil // dup'd onto its index like every entry
		}
		if int(f) > highest && f != ^uintptr(0) {
			highest = int(f)
		}
	}
	min := highest + len(attr.Files) + 3
	if fd <= highest || fd >= min {
		return path, none, nil // out of the shuffle's reach already
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, min)
	if errors.Is(err, unix.EINVAL) {
		// min is past RLIMIT_NOFILE: the lowest free number will do if
		// it is not in the shuffle's range either.
		if dup, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, len(attr.Files)); err == nil && dup > highest {
			unix.Close(dup)
			err = unix.EMFILE
		}
	}
	if err != nil {
		return "", none, err
	}
	return prefix + strconv.Itoa(dup), func() { unix.Close(dup) }, nil
}
