//go:build linux

package reaper

// The limits-exec entry (LimitsExecArg): a provider whose limits are in
// cgroup v1 hierarchies is forked, still straight into its v2 cgroup
// (CLONE_INTO_CGROUP), as
//
//	<sidecar binary> __limits-exec status=<fd> [cloexec=<fd>] <v1 cgroup.procs>... -- <exec path> <argv0> <args>...
//
// That process (same pid as the provider will have) writes its own pid
// into each v1 cgroup.procs, marks the status pipe (and, for a non-script
// ExecFile, the executable's descriptor) close-on-exec, and execve's the
// real provider with its environment unchanged. So the provider runs no
// code of its own outside its limits. Start reads the status pipe: EOF
// with nothing written means the execve succeeded (the pipe closed with
// it); otherwise the process wrote why and exits LimitsExecFailed, and
// Start fails with nothing left running. docs/architecture.md, "Limits on
// cgroup v1".

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"go.uber.org/zap"
)

// LimitsExecFailed is the exit status of a limits-exec process that could
// not place itself in its cgroups or execute the provider (the reason is
// on its status pipe and its stderr).
const LimitsExecFailed = 125

// limitsExecStage prefixes of a status-pipe message: "join" (a v1
// cgroup.procs write failed), "exec" (execve failed), "usage" (bad
// arguments); then " <errno> <text>".
const (
	stageJoin  = "join"
	stageExec  = "exec"
	stageUsage = "usage"
)

// limitsExecMain runs the limits-exec entry with args (after
// LimitsExecArg). It returns only on failure, with LimitsExecFailed (2 for
// a hand-started one without a status pipe).
func limitsExecMain(args []string) int {
	status, cloexec := -1, -1
	i := 0
	for ; i < len(args); i++ {
		if v, ok := strings.CutPrefix(args[i], "status="); ok {
			status, _ = strconv.Atoi(v)
		} else if v, ok := strings.CutPrefix(args[i], "cloexec="); ok {
			cloexec, _ = strconv.Atoi(v)
		} else {
			break
		}
	}
	var procs []string
	for ; i < len(args) && args[i] != "--"; i++ {
		procs = append(procs, args[i])
	}
	if status < 0 || i >= len(args) {
		fmt.Fprintln(os.Stderr, "acpx-sidecar "+LimitsExecArg+": started by hand? usage: status=<fd> [cloexec=<fd>] <cgroup.procs>... -- <path> <argv0> [args...]")
		if status >= 0 {
			report(status, stageUsage, syscall.EINVAL, "bad arguments")
			return LimitsExecFailed
		}
		return 2
	}
	rest := args[i+1:]
	if len(rest) < 2 {
		report(status, stageUsage, syscall.EINVAL, "no program")
		return LimitsExecFailed
	}
	path, argv := rest[0], rest[1:]
	if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(status), syscall.F_SETFD, syscall.FD_CLOEXEC); e != 0 {
		return LimitsExecFailed // no status pipe to report on: Start sees EOF and this exit
	}
	if cloexec >= 0 {
		if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(cloexec), syscall.F_SETFD, syscall.FD_CLOEXEC); e != 0 {
			report(status, stageExec, e, "fcntl")
			return LimitsExecFailed
		}
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, p := range procs {
		if e := writeRaw(p, pid); e != 0 {
			report(status, stageJoin, e, p)
			return LimitsExecFailed
		}
	}
	err := syscall.Exec(path, argv, os.Environ())
	e, _ := err.(syscall.Errno)
	if e == 0 {
		e = syscall.EINVAL
	}
	report(status, stageExec, e, path)
	return LimitsExecFailed
}

// writeRaw opens path write-only and writes b, with raw system calls: once
// this process is in a pids-limited cgroup no call here may make the Go
// runtime start a thread (a refused clone is fatal to it).
func writeRaw(path string, b []byte) syscall.Errno {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return syscall.EINVAL
	}
	fd, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)),
		uintptr(syscall.O_WRONLY|syscall.O_CLOEXEC), 0, 0, 0)
	if e != 0 {
		return e
	}
	_, _, e = syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	syscall.RawSyscall(syscall.SYS_CLOSE, fd, 0, 0)
	return e
}

// atFDCWD is AT_FDCWD as an unsigned system-call argument.
var atFDCWD = -100

// report writes "<stage> <errno> <text>" to the status pipe and the same
// line to stderr.
func report(fd int, stage string, e syscall.Errno, text string) {
	msg := stage + " " + strconv.Itoa(int(e)) + " " + text
	fmt.Fprintln(os.Stderr, "acpx-sidecar "+LimitsExecArg+": "+stage+" "+text+": "+e.Error())
	_, _ = syscall.Write(fd, []byte(msg))
}

// parseLimitsExecStatus turns a status-pipe message into the error Start
// returns ("" = success). An exec failure carries the errno (as a direct
// fork/exec failure does); a join failure says which cgroup.procs.
func parseLimitsExecStatus(msg, path string) error {
	if msg == "" {
		return nil
	}
	stage, rest, _ := strings.Cut(msg, " ")
	num, text, _ := strings.Cut(rest, " ")
	n, _ := strconv.Atoi(num)
	e := syscall.Errno(n)
	switch stage {
	case stageExec:
		return fmt.Errorf("reaper: start %s: %w", path, e)
	case stageJoin:
		return fmt.Errorf("reaper: start %s: place the provider in its cgroup v1 limits (%s): %w", path, text, e)
	}
	return fmt.Errorf("reaper: start %s: limits-exec: %s", path, msg)
}

// limitsExecTimeout bounds how long Start waits for a limits-exec process
// to join its cgroups and execve the provider (a Go runtime start and a
// few writes; generous for a loaded machine).
const limitsExecTimeout = 20 * time.Second

// limitsExecArgv is the path and argv that start the provider (path, argv)
// through the limits-exec entry of binary: status pipe at child fd
// statusFD; execFD, when not kept (a non-script ExecFile), is made
// close-on-exec; v1 are the cgroups to join (pids last: after that write
// a refused clone could only hit the execve itself).
func limitsExecArgv(binary string, statusFD, execFD int, keepExecFD bool, v1 map[string]string, path string, argv []string) (string, []string) {
	out := []string{binary, LimitsExecArg, "status=" + strconv.Itoa(statusFD)}
	if execFD >= 0 && !keepExecFD {
		out = append(out, "cloexec="+strconv.Itoa(execFD))
	}
	for _, c := range []string{"memory", "cpu", "pids"} {
		if d, ok := v1[c]; ok {
			out = append(out, filepath.Join(d, "cgroup.procs"))
		}
	}
	out = append(out, "--", path)
	return binary, append(out, argv...)
}

// awaitLimitsExec waits for t's limits-exec process to report (EOF: the
// provider runs, inside its limits). On a failure or timeout the process
// is killed with its v2 cgroup and reaped, the tree unregistered, and the
// error returned (the caller removes the cgroups). s.mu held.
func (s *Supervisor) awaitLimitsExec(t *Tree, status *os.File, path string) error {
	_ = status.SetReadDeadline(time.Now().Add(limitsExecTimeout))
	b, rerr := io.ReadAll(io.LimitReader(status, 4096))
	err := parseLimitsExecStatus(string(b), path)
	if err == nil && rerr != nil {
		err = fmt.Errorf("reaper: start %s: no word from the limits-exec entry within %s: %w", path, limitsExecTimeout, rerr)
	}
	if err == nil {
		return nil
	}
	_ = writeCgroupKill(t.cgPath)
	select {
	case <-t.exited:
	case <-time.After(limitsExecTimeout):
		s.log.Warn("reaper: limits-exec process not reaped", zap.Int("pid", t.pid))
	}
	waitCgroupEmpty(s.c.watch, nil, nil, t.cgPath, time.Second, nil)
	s.c.unregister(t)
	t.closeFDs()
	return err
}
