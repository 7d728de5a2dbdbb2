// Package launchexec is the launch entry: the first image of every
// provider with cgroup v1 limits, which it must join inside its own
// process before the agent's first instruction (docs/architecture.md,
// "Limits on cgroup v1"). The sandbox itself (namespaces, capabilities,
// seccomp, Landlock) is applied by the launcher on a thread of its own
// before the fork (sandbox.Start); only the Landlock domain of a
// sandboxed provider with v1 limits is enforced here, after the joins,
// since Landlock would forbid opening the cgroup files and executing
// this binary. The sidecar (cgroup mode) forks
//
//	<sidecar binary> __launch status=<fd> [cloexec=<fd>] [landlock=<ruleset fd>] <v1 cgroup.procs>... -- <exec path> <argv0> <args>...
//
// and that process, which has the pid the provider will have, joins its
// cgroup v1 limit hierarchies, enforces the ruleset on its one locked OS
// thread and execve's the provider from that thread with its environment
// unchanged. The status pipe tells the launcher how it went: EOF with
// nothing written means the execve succeeded (the pipe is close-on-exec);
// otherwise the entry wrote "<stage> <errno> <text>" and exits Failed
// (ParseStatus turns that into an error).
//
// This package also holds the one re-exec dispatch of the sidecar binary
// (MaybeRun, in the style of moby/sys reexec with no init function):
// cmd/acpx-sidecar's main and every test binary that launches providers
// call it first thing. It also runs the fallback init of a tree's PID
// namespace (sandbox.InitArg → sandbox.InitMain).
package launchexec

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// Arg is the os.Args[1] of a launch entry process.
const Arg = "__launch"

// Failed is the exit status of a launch entry that could not place
// itself in its cgroups, apply its sandbox or execute the provider (the
// reason is on its status pipe and its stderr).
const Failed = 125

// Timeout bounds how long a launcher waits for the entry's word (a Go
// runtime start, a few writes, a ruleset; generous for a loaded machine).
const Timeout = 20 * time.Second

// Stages of a status-pipe message: "join" (a v1 cgroup.procs open or
// write failed), "sandbox" (applying the sandbox failed), "exec" (execve
// failed), "usage" (bad arguments).
const (
	StageJoin    = "join"
	StageSandbox = "sandbox"
	StageExec    = "exec"
	StageUsage   = "usage"
)

// ErrSandbox is wrapped by ParseStatus's error when the sandbox could
// not be applied: nothing of the agent ran.
var ErrSandbox = fmt.Errorf("launchexec: the sandbox could not be applied")

// Entry is a re-exec entry point other than the launch entry (the
// guardian, the watchdog): it gets os.Args[2:] and returns the process's
// exit status.
type Entry func(args []string) int

// exit ends an entry's process. syscall.Exit, not os.Exit: nothing is
// left to flush, and a -race build would otherwise sleep 1 s at exit.
var exit = syscall.Exit

// MaybeRun is the re-exec dispatch of the sidecar binary, called first
// thing in main (before flags): if os.Args[1] is Arg the process is a
// launch entry and never returns (it becomes the provider or exits
// Failed); if os.Args[1] names one of entries, that entry runs with
// os.Args[2:] and the process exits with its status. Otherwise it
// returns false at once, having done nothing.
func MaybeRun(entries map[string]Entry) bool {
	return maybeRun(os.Args, entries, Main, exit)
}

func maybeRun(args []string, entries map[string]Entry, launch func([]string) int, exit func(int)) bool {
	if len(args) < 2 {
		return false
	}
	switch args[1] {
	case Arg:
		exit(launch(args[2:]))
		return true
	case sandbox.InitArg:
		exit(sandbox.InitMain(args[2:]))
		return true
	}
	if e, ok := entries[args[1]]; ok && e != nil {
		exit(e(args[2:]))
		return true
	}
	return false
}

// Argv is the argv that starts the provider (path, argv) through the
// launch entry of binary: the status pipe at child fd statusFD; cloexecFD
// (>= 0) is a descriptor to mark close-on-exec before the execve (a
// non-script ExecFile that only execve needs); landlockFD (>= 0) is the
// child fd of a Landlock ruleset to enforce (sandbox.Start's
// EntryLandlock); procs are v1 cgroup.procs files to join, in order
// (pids last: after that write a refused clone could only hit the execve
// itself).
func Argv(binary string, statusFD, cloexecFD, landlockFD int, procs []string, path string, argv []string) []string {
	out := []string{binary, Arg, "status=" + strconv.Itoa(statusFD)}
	if cloexecFD >= 0 {
		out = append(out, "cloexec="+strconv.Itoa(cloexecFD))
	}
	if landlockFD >= 0 {
		out = append(out, "landlock="+strconv.Itoa(landlockFD))
	}
	out = append(out, procs...)
	out = append(out, "--", path)
	return append(out, argv...)
}

// ReadStatus waits (at most Timeout) for the launch entry's word on the
// read end of its status pipe, whose write end the launcher has closed:
// nil once it hits EOF with nothing written (the provider runs), else
// ParseStatus's error, or a timeout error naming path.
func ReadStatus(status *os.File, path string) error {
	_ = status.SetReadDeadline(time.Now().Add(Timeout))
	b, rerr := io.ReadAll(io.LimitReader(status, 4096))
	err := ParseStatus(string(b), path)
	if err == nil && rerr != nil {
		err = fmt.Errorf("start %s: no word from the launch entry within %s: %w", path, Timeout, rerr)
	}
	return err
}

// ParseStatus turns a status-pipe message into the error a launcher
// returns ("" = success). An exec failure carries the errno (as a direct
// fork/exec failure does); a join failure says which cgroup.procs; a
// sandbox failure wraps ErrSandbox and the errno.
func ParseStatus(msg, path string) error {
	if msg == "" {
		return nil
	}
	stage, rest, _ := strings.Cut(msg, " ")
	num, text, _ := strings.Cut(rest, " ")
	n, _ := strconv.Atoi(num)
	e := syscall.Errno(n)
	switch stage {
	case StageExec:
		return fmt.Errorf("start %s: %w", path, e)
	case StageJoin:
		return fmt.Errorf("start %s: place the provider in its cgroup v1 limits (%s): %w", path, text, e)
	case StageSandbox:
		return fmt.Errorf("start %s: %w: %s: %w", path, ErrSandbox, text, e)
	}
	return fmt.Errorf("start %s: launch entry: %s", path, msg)
}
