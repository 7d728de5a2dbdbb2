package reaper

// Process-global entry points. Linking this package changes nothing in the
// process (there is no init function with side effects); the two
// process-wide steps a sidecar needs are explicit calls its main makes, in
// the style of moby/sys reexec:
//
//   - MaybeRunGuardian, first thing in main (before flag parsing): a
//     Supervisor starts each provider's guardian by re-executing a binary
//     (Options.GuardianPath, default os.Executable()) with argv[1]
//     GuardianArg, and that binary must hand such a process over to the
//     guardian. A test binary that makes a Supervisor is re-executed itself,
//     so its TestMain must call MaybeRunGuardian first. It also
//     dispatches LimitsExecArg, the entry a provider with cgroup v1
//     limits is started through (limits_exec_linux.go).
//   - BecomeSubreaper, before NewSupervisor (which fails with
//     ErrNotSubreaper otherwise): see subreaper_linux.go.

import (
	"os"
	"syscall"
)

// GuardianArg is the os.Args[1] of a guardian process: the Supervisor starts
// each guardian as [Options.GuardianPath, GuardianArg], and MaybeRunGuardian
// recognises it.
const GuardianArg = "__guardian"

// LimitsExecArg is the os.Args[1] of a provider started through the
// limits-exec entry (cgroup v1 limits, docs/architecture.md "Limits on
// cgroup v1"): [GuardianPath, LimitsExecArg, "status=<fd>",
// ["cloexec=<fd>"], <v1 cgroup.procs>..., "--", <path>, <argv0>, <args>...].
// MaybeRunGuardian recognises it: the process joins those cgroups and
// execve's the provider, or exits LimitsExecFailed.
const LimitsExecArg = "__limits-exec"

// guardianExit ends a guardian process. syscall.Exit, not os.Exit: nothing
// is left to flush, and a -race build would otherwise sleep 1 s at exit
// (GORACE atexit_sleep_ms) before the sidecar sees the guardian gone.
var guardianExit = syscall.Exit

// MaybeRunGuardian is the guardian's re-exec entry point; the main function
// of every binary that can be started as a guardian (cmd/acpx-sidecar; a
// test binary, from its TestMain) calls it first, before parsing flags or
// starting anything.
//
// If os.Args[1] is LimitsExecArg the process is a provider being placed
// in its cgroup v1 limits: it becomes the provider (execve) or exits
// LimitsExecFailed, and never returns. If os.Args[1] is neither that nor
// GuardianArg, it returns false at once, having done nothing. Otherwise
// this process is a guardian started by a Supervisor: it runs GuardianMain(os.Args[2:]) and ends the process with its status, so
// it does not return (the true result is only for symmetry with reexec.Init
// and is never seen by a caller). Started by hand, outside a Supervisor, a
// guardian prints an error and exits with status 2.
func MaybeRunGuardian() bool {
	return maybeRunGuardian(os.Args, GuardianMain, guardianExit)
}

// maybeRunGuardian is MaybeRunGuardian with its process hooks passed in.
func maybeRunGuardian(args []string, run func([]string) int, exit func(int)) bool {
	if len(args) >= 2 && args[1] == LimitsExecArg {
		exit(limitsExecMain(args[2:]))
		return true
	}
	if len(args) < 2 || args[1] != GuardianArg {
		return false
	}
	exit(run(args[2:]))
	return true
}
