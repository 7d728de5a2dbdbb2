package reaper

// Process-global entry points. Linking this package changes nothing in the
// process (there is no init function with side effects); the two
// process-wide steps a sidecar needs are explicit calls its main makes, in
// the style of moby/sys reexec:
//
//   - launchexec.MaybeRun(reaper.Entries()) (or MaybeRunGuardian, the
//     same), first thing in main (before flag parsing): a Supervisor
//     re-executes a binary (Options.GuardianPath, default os.Executable())
//     as each provider's guardian ([path, GuardianArg]), as its watchdog
//     ([path, GuardianArg, "watchdog"]) and as the launch entry of a
//     provider with cgroup v1 limits or a sandbox ([path,
//     launchexec.Arg, ...]), and that binary must hand such a process over.
//     A test binary that makes a Supervisor is re-executed itself, so its
//     TestMain must call it first.
//   - BecomeSubreaper, before NewSupervisor (which fails with
//     ErrNotSubreaper otherwise): see subreaper_linux.go.

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/guardian"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launchexec"
)

// GuardianArg is the os.Args[1] of a guardian or watchdog process
// (guardian.Arg).
const GuardianArg = guardian.Arg

// Entries are the reaper's re-exec entries for launchexec.MaybeRun:
// GuardianArg runs the guardian program (internal/guardian) or, with
// os.Args[2] "watchdog", the cgroup-mode watchdog (watchdog_linux.go).
func Entries() map[string]launchexec.Entry {
	return map[string]launchexec.Entry{GuardianArg: guardianEntry}
}

// MaybeRunGuardian is launchexec.MaybeRun(Entries()): the one call a
// binary that can be re-executed by a Supervisor makes first thing in its
// main. It returns false, having done nothing, unless os.Args[1] is
// GuardianArg or launchexec.Arg; then the process runs that entry and
// exits inside it.
func MaybeRunGuardian() bool {
	return launchexec.MaybeRun(Entries())
}
