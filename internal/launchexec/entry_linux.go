//go:build linux

package launchexec

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// Main runs the launch entry with args (os.Args[2:]; see the package
// doc). It returns only on failure, with Failed (2 for a hand-started one
// without a status pipe).
//
// Order: the OS thread is locked for good (the Landlock domain is per
// thread, and the execve must come from the same one); the v1
// cgroup.procs files are opened while the sandbox still lets them be
// (Landlock checks at open); the Landlock ruleset the launcher handed
// over is enforced (everything else of the sandbox — namespaces,
// capabilities, the seccomp filter, no_new_privs — the launcher's thread
// applied before the fork, sandbox.Start); the pid is written to each
// opened cgroup.procs, pids last, with raw system calls (once in a
// pids-limited cgroup, nothing here may make the Go runtime start a
// thread: a refused clone is fatal to it); then execve.
func Main(args []string) int {
	runtime.LockOSThread() // never unlocked: this thread becomes the agent
	status, cloexec, ruleset := -1, -1, -1
	i := 0
	for ; i < len(args); i++ {
		if v, ok := strings.CutPrefix(args[i], "status="); ok {
			status, _ = strconv.Atoi(v)
		} else if v, ok := strings.CutPrefix(args[i], "cloexec="); ok {
			cloexec, _ = strconv.Atoi(v)
		} else if v, ok := strings.CutPrefix(args[i], "landlock="); ok {
			ruleset, _ = strconv.Atoi(v)
		} else {
			break
		}
	}
	var procs []string
	for ; i < len(args) && args[i] != "--"; i++ {
		procs = append(procs, args[i])
	}
	if status < 0 || i >= len(args) {
		fmt.Fprintln(os.Stderr, "acpx-sidecar "+Arg+": started by hand? usage: status=<fd> [cloexec=<fd>] [landlock=<fd>] <cgroup.procs>... -- <path> <argv0> [args...]")
		if status >= 0 {
			report(status, StageUsage, syscall.EINVAL, "bad arguments")
			return Failed
		}
		return 2
	}
	rest := args[i+1:]
	if len(rest) < 2 {
		report(status, StageUsage, syscall.EINVAL, "no program")
		return Failed
	}
	path, argv := rest[0], rest[1:]
	if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(status), syscall.F_SETFD, syscall.FD_CLOEXEC); e != 0 {
		return Failed // no status pipe to report on: the launcher sees EOF and this exit
	}
	if cloexec >= 0 {
		if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(cloexec), syscall.F_SETFD, syscall.FD_CLOEXEC); e != 0 {
			report(status, StageExec, e, "fcntl")
			return Failed
		}
	}
	fds := make([]uintptr, 0, len(procs))
	for _, p := range procs {
		fd, e := openRaw(p)
		if e != 0 {
			report(status, StageJoin, e, p)
			return Failed
		}
		fds = append(fds, fd)
	}
	if ruleset >= 0 {
		if err := sandbox.RestrictSelf(ruleset); err != nil {
			var e syscall.Errno
			if !errors.As(err, &e) {
				e = syscall.EPERM
			}
			report(status, StageSandbox, e, err.Error())
			return Failed
		}
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	for k, fd := range fds {
		_, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&pid[0])), uintptr(len(pid)))
		syscall.RawSyscall(syscall.SYS_CLOSE, fd, 0, 0)
		if e != 0 {
			report(status, StageJoin, e, procs[k])
			return Failed
		}
	}
	err := syscall.Exec(path, argv, os.Environ())
	e, _ := err.(syscall.Errno)
	if e == 0 {
		e = syscall.EINVAL
	}
	report(status, StageExec, e, path)
	return Failed
}

// openRaw opens path write-only and close-on-exec with a raw system call.
func openRaw(path string) (uintptr, syscall.Errno) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return 0, syscall.EINVAL
	}
	fd, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)),
		uintptr(syscall.O_WRONLY|syscall.O_CLOEXEC), 0, 0, 0)
	return fd, e
}

// atFDCWD is AT_FDCWD as an unsigned system-call argument.
var atFDCWD = -100

// report writes "<stage> <errno> <text>" to the status pipe and the same
// line to stderr.
func report(fd int, stage string, e syscall.Errno, text string) {
	msg := stage + " " + strconv.Itoa(int(e)) + " " + text
	fmt.Fprintln(os.Stderr, "acpx-sidecar "+Arg+": "+stage+" "+text+": "+e.Error())
	_, _ = syscall.Write(fd, []byte(msg))
}
