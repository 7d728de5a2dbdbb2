// Package reaper launches ACP provider processes, contains their whole
// process trees, terminates them, and reports what it observed as the facts
// of a cleanup proof (docs/protocol.md §12).
//
// Containment, strongest first (docs/operations.md, "Containment modes";
// docs/architecture.md, "Containment at scale"):
//
//   - ModeCgroup: the sidecar forks each provider itself, straight into its
//     own cgroup v2 child (clone3 CLONE_INTO_CGROUP via
//     SysProcAttr.UseCgroupFD, so there is no window outside it); there is
//     no per-provider helper process. Orphaned descendants re-parent to the
//     sidecar (a child subreaper) and are reaped and attributed here.
//     Termination: SIGTERM to every cgroup member (pidfd), then cgroup.kill;
//     the proof is cgroup.events "populated 0" (an inotify event on the
//     process's one shared instance, no polling) plus two clean passes over
//     the sidecar's children, where a process that moved itself out of the
//     cgroup (a root provider can) ends up. The cgroup and any sub-cgroups
//     are removed, deepest first. The sidecar's death is covered by ONE
//     watchdog process per Supervisor (watchdog_linux.go), which
//     cgroup.kills every registered provider cgroup when its pipe from the
//     sidecar hits EOF.
//   - ModeSubreaper: the per-provider guardian (a re-execution of this
//     binary, a child subreaper, see internal/guardian) is the provider's
//     parent; every orphaned descendant, setsid or not, re-parents to it.
//     Termination asks the guardian to TERM, then KILL, the pinned group
//     and every live descendant (via pidfds); the proof is the guardian
//     having no child left. The guardian holds a pipe from the sidecar and
//     kills the tree if the sidecar dies. Cost: one process per session.
//   - ModeProcessGroup: an ALIAS of ModeSubreaper (Detect says so): the
//     provider gets its own process group and runs behind the same
//     guardian, which is what covers setsid'd descendants and the
//     sidecar's death; the name is kept because hosts may ask for it
//     (docs/protocol.md), and proofs report the mode asked for.
//
// The one kill algorithm the sidecar runs itself (ModeCgroup, and a tree
// whose guardian died) is kill_linux.go; signalPinned (pidfd_linux.go) is
// the one "pin, re-check, signal" step; cgroup.WriteKill and
// cgroup.NewProvider (internal/reaper/cgroup) the one cgroup.kill writer
// and the one place a provider cgroup is made.
//
// The parts: this package is the launcher, the Supervisor (the central
// reaper, the guardian client, the watchdog) and its Tree, with the
// proof's types (Spec, TreeInfo, Termination, …) every mode shares;
// internal/reaper/cgroup is the cgroup handling (cgroup v2 files, the
// inotify wait for "populated 0", resource limits in cgroup v2 and v1);
// internal/reaper/tablemode is ModeProcessTable (macOS), a second
// implementation of the same Tree seam (internal/launch's Tree).
//
// Linking this package changes nothing in the process. Its two
// process-wide steps are explicit calls a sidecar's main makes (reexec.go):
// MaybeRunGuardian first thing, to run a guardian or watchdog
// re-execution of the binary, and BecomeSubreaper before NewSupervisor.
//
// The Supervisor owns ALL waiting for children of this process: one
// process-wide goroutine reacts to SIGCHLD and reaps with waitid/wait4(-1).
// Do not use exec.Cmd.Wait or os.Process.Wait anywhere in a process that has
// a live Supervisor; those children would be reaped (and logged as
// unattributed) by the Supervisor instead.
package reaper

import (
	"errors"
	"io"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Mode names a containment mechanism. Its string is the value of
// `containment` in cleanup proofs (docs/protocol.md §12) and in
// `initialize.capabilities.containment`.
type Mode string

const (
	// ModeCgroup is a cgroup v2 child per provider (strongest).
	ModeCgroup Mode = "cgroup"
	// ModeSubreaper is the subreaper guardian mode: the tree is every
	// descendant of the provider's guardian.
	ModeSubreaper Mode = "subreaper"
	// ModeProcessGroup is an alias of ModeSubreaper (the package doc):
	// the same per-provider guardian, reported under the name asked for.
	ModeProcessGroup Mode = "process-group"
)

// Roles of processes in ProcessRecord.Role (docs/protocol.md §12).
const (
	RoleProvider   = "provider"
	RoleDescendant = "descendant"
)

// Error codes used in ErrorRecord.Code: the proof's (protocol).
const (
	// CodeSignalFailed: a signal could not be delivered (other than "no
	// such process", which only means the process already exited).
	CodeSignalFailed = string(protocol.ErrSignalDeliveryFailed)
	// CodeKillTimeout: the tree was not observed empty within killGrace after
	// SIGKILL (docs/rules.md#r12; message "provider did not exit after SIGKILL").
	CodeKillTimeout = string(protocol.ErrProviderKillTimeout)
	// CodeCgroupRemove: the tree is empty but its cgroup directory could not
	// be removed (the proof is still complete).
	CodeCgroupRemove = string(protocol.ErrCgroupRemoveFailed)
)

// ErrSealed is returned by Supervisor.Start after Supervisor.Seal; nothing is
// launched (docs/rules.md#r21).
var ErrSealed = errors.New("reaper: supervisor is sealed; no provider may be started")

// ErrClosed is returned by Supervisor.Start after Supervisor.Close.
var ErrClosed = errors.New("reaper: supervisor is closed")

// ErrUnsupported is returned by NewSupervisor when no containment mechanism
// is available (or the requested one is not), e.g. on non-Linux builds
// (docs/rules.md#r2: the caller maps it to PLATFORM_UNSUPPORTED).
var ErrUnsupported = errors.New("reaper: containment mechanism unavailable on this platform")

// ErrNotSubreaper is returned by NewSupervisor when this process is not a
// child subreaper: call BecomeSubreaper first.
var ErrNotSubreaper = errors.New("reaper: this process is not a child subreaper (call BecomeSubreaper before NewSupervisor)")

// Mechanism is one line of `acpx-sidecar doctor`: whether a containment mode
// is usable here and why (or why not).
type Mechanism struct {
	// Mode is the containment mode this line is about.
	Mode Mode `json:"mode"`
	// Available is true when the mode can be used on this machine.
	Available bool `json:"available"`
	// Reason says what the mode relies on when Available, else why it
	// cannot be used.
	Reason string `json:"reason"`
}

// Spec describes one provider launch. Env is passed only to the child; it is
// never logged nor included in errors (docs/rules.md#r3).
type Spec struct {
	// Path is the absolute path of the executable; it is also argv[0].
	Path string
	// Args are argv[1:].
	Args []string
	// Env is the complete environment of the child, "K=V" entries.
	Env []string
	// Dir is the working directory ("" = inherit).
	Dir string
	// ExecFile, if set, is an already opened (O_PATH or O_RDONLY) verified
	// executable; the child executes THAT file through /proc/self/fd and Path
	// is never re-resolved (docs/rules.md#r4). For "#!" scripts the file is
	// inherited by the child as fd 3 so the interpreter can open it; for
	// binaries it is not inherited. The caller keeps ownership of the file.
	ExecFile *os.File
	// Name labels the cgroup directory "<Name>-<n>"; [A-Za-z0-9._-]{1,64},
	// "" = "provider".
	Name string
	// Limits are written into the provider's cgroup before the fork
	// (cgroup.ApplyLimits, cgroup.MakeV1Limits); outside cgroup mode any limit fails Start with
	// ErrLimitsUnsupported, launching nothing.
	Limits Limits
	// Sandbox, if not empty, is applied by the launch entry
	// (internal/launchexec) in the provider's own process before the
	// agent runs; a failure to apply it fails Start with an error
	// wrapping launchexec.ErrSandbox, launching nothing. A mode without
	// sandbox support (SandboxSupported) fails Start with
	// ErrSandboxUnsupported.
	Sandbox *sandbox.Plan
}

// TreeInfo identifies a launched tree (a proof's and the ownership
// ledger's facts about it): the provider (leader) pid and its process
// group, the leader's start time in the process table's units (StartTicks:
// clock ticks since boot on Linux, microseconds since the epoch on Darwin)
// kept against pid reuse, when it was started (wall clock), the
// containment mode and the tree's cgroup directory ("" outside cgroup
// mode).
type TreeInfo struct {
	// Pid is the provider (leader) pid, never its guardian's.
	Pid int
	// Pgid is the leader's process group.
	Pgid int
	// StartTicks is the leader's start time in the process table's units,
	// which with Pid tells the leader from a process reusing its pid.
	StartTicks uint64
	// StartedAt is the wall-clock time the leader was started.
	StartedAt time.Time
	// Containment is the mode that contains the tree.
	Containment Mode
	// CgroupPath is the absolute path of the tree's cgroup directory (""
	// outside cgroup mode).
	CgroupPath string
}

// Stdio is the parent's ends of the provider's pipes: the write end of its
// stdin and the read ends of its stdout and stderr (the caller closes
// them). Descendants inherit the pipes, so stdout's EOF may come only once
// the whole tree is gone.
type Stdio struct {
	// Stdin is the write end of the provider's stdin.
	Stdin io.WriteCloser
	// Stdout is the read end of the provider's stdout.
	Stdout io.ReadCloser
	// Stderr is the read end of the provider's stderr.
	Stderr io.ReadCloser
}

// ExitStatus is the wait status of the provider (leader) process.
// Exactly one of Code and Signal is set.
type ExitStatus struct {
	// Code is the exit code of a normal exit (nil when a signal ended the
	// process).
	Code   *int      `json:"exitCode"`
	Signal string    `json:"signal,omitempty"` // e.g. "SIGKILL"
	At     time.Time `json:"at"`               // when it was reaped
}

// SignalRecord is one signal step sent to a tree (docs/protocol.md §12
// `signals`). Target is "tree" (every member: cgroup members, or group +
// tracked descendants). Error is set when delivery to some member failed.
type SignalRecord struct {
	// Signal is the signal's name, "SIGTERM" or "SIGKILL" (a cgroup.kill
	// is recorded as "SIGKILL").
	Signal string `json:"signal"`
	// Target is what the signal was sent to: "tree", or, for one process
	// Recover killed by its marker, RoleProvider or RoleDescendant.
	Target string `json:"target"`
	// At is when the signal was sent.
	At time.Time `json:"at"`
	// Error says why delivery failed ("" when it did not).
	Error string `json:"error,omitempty"`
}

// ProcessRecord is one process of the tree that was reaped by the sidecar
// or observed gone (docs/protocol.md §12 `processes`). ExitCode and Signal
// are both empty for a process that was reaped by its own parent (observed
// gone).
type ProcessRecord struct {
	// Pid is the process's pid.
	Pid  int    `json:"pid"`
	Role string `json:"role"` // RoleProvider or RoleDescendant
	// ExitCode is the exit code of a normal exit, else nil.
	ExitCode *int `json:"exitCode"`
	// Signal names the signal that ended the process (under
	// process-table, for one the sidecar did not reap, the last it sent
	// it); "" when none is known.
	Signal string `json:"signal,omitempty"`
	// ExitedAt is when the process was observed gone.
	ExitedAt time.Time `json:"exitedAt"`
	// Reaped is true if this process's wait status was collected here.
	Reaped bool `json:"-"`
	// ReapedBy is ReapedByParent when neither ExitCode nor Signal is
	// known: the process was observed gone, its wait status collected by
	// its own parent (docs/protocol.md §21, Proof entries).
	ReapedBy string `json:"reapedBy,omitempty"`
}

// ReapedByParent is ProcessRecord.ReapedBy of a process its own parent
// reaped (protocol.ReapedByParent).
const ReapedByParent = "parent"

// withHowEnded returns p with ReapedBy ReapedByParent when it carries
// neither an exit code nor a signal, so every record says how its process
// ended.
func (p ProcessRecord) withHowEnded() ProcessRecord {
	if p.ExitCode == nil && p.Signal == "" {
		p.ReapedBy = ReapedByParent
	}
	return p
}

// Verification says how the tree was observed empty (docs/protocol.md §12
// `verified`).
// Method, when TreeEmpty:
//   - cgroup (no guardian): "cgroup.events populated 0; two consecutive
//     passes, a reap cycle apart, found no live process of the tree
//     outside the cgroup (…)" (methodCgroup), followed by the processes
//     that had moved themselves out of the cgroup, when there were any;
//   - subreaper, process-group, guardian alive to the end: "guardian reaped
//     every descendant; no live process with the guardian as ancestor";
//   - guardian died before the tree was empty: "guardian died: two
//     consecutive passes, a reap cycle apart, found no live child of the
//     sidecar attributable to the tree and no live tracked process (/proc
//     scan)", prefixed by "cgroup.events populated 0; " in cgroup mode.
//
// When not TreeEmpty it names what was still seen: "cgroup.events
// populated 1", "guardian still has live descendants", both, "cgroup.events
// populated 0, but the guardian still has live descendants (outside the
// cgroup)", "cgroup.events populated 1 (guardian died before the tree was
// empty)", or "guardian died before the tree was empty; a live re-parented
// child of the sidecar or a live tracked process remains".
type Verification struct {
	// TreeEmpty is true only when no process of the tree was observed
	// left.
	TreeEmpty bool `json:"treeEmpty"`
	// Method is the evidence in words: how emptiness was observed, or
	// what was still seen (docs/protocol.md §12 lists the strings).
	Method string `json:"method"`
}

// ErrorRecord is one error of a termination, in order (docs/rules.md#r12).
type ErrorRecord struct {
	// Code is the proof's error code (CodeSignalFailed, CodeKillTimeout,
	// CodeCgroupRemove, …).
	Code string `json:"code"`
	// Message says what failed, for people.
	Message string `json:"message"`
}

// Termination is the result of Tree.Terminate. Signals, Processes and Errors
// are cumulative over every Terminate call on the same Tree (the retries of
// docs/rules.md#r20), so the last Termination is the whole proof.
type Termination struct {
	// Signals are the signal steps sent to the tree, in order (empty when
	// it had already ended).
	Signals []SignalRecord `json:"signals"`
	// Processes are the tree's processes seen gone, descendants included
	// (never a guardian).
	Processes []ProcessRecord `json:"processes"`
	// Containment is the mode the tree was contained in.
	Containment Mode `json:"containment"`
	// Verified says how the tree was observed empty, or what remained.
	Verified Verification `json:"verified"`
	// Complete is true ONLY if the tree was observed empty (docs/protocol.md
	// §12).
	Complete bool `json:"complete"`
	// Errors are the termination's errors in the order they happened
	// (empty: none).
	Errors []ErrorRecord `json:"errors,omitempty"`
}

// Options configures a Supervisor.
type Options struct {
	// Mode is the containment to use; "" = the strongest available from
	// Detect. A requested mode that is unavailable makes NewSupervisor fail
	// with ErrUnsupported (see Detect).
	Mode Mode
	// CgroupParent is the cgroup v2 directory under which every provider
	// gets "<Name>-<n>". "" = "<writable cgroup2 mount>/acpx-sidecar-<pid>".
	// Created with mode 0755 if missing; Close removes it when empty.
	CgroupParent string
	// Logger receives diagnostics (never launch env). nil = zap.NewNop().
	Logger *zap.Logger
	// GuardianPath is the absolute path of the executable started as each
	// provider's guardian with argv [GuardianPath, GuardianArg] (subreaper,
	// process-group), or as the Supervisor's watchdog with argv
	// [GuardianPath, GuardianArg, "watchdog"] (cgroup), and as the first
	// image of a provider with cgroup v1 limits with argv [GuardianPath,
	// launchexec.Arg, …] (the launch entry: cgroup v1 limits, a
	// sandbox); its main
	// must dispatch the re-exec first thing (cmd/acpx-sidecar calls
	// launchexec.MaybeRun(reaper.Entries()); a test binary, re-executed by
	// the default, calls MaybeRunGuardian from its TestMain).
	// "" = this process's own image through /proc/self/exe (selfExe),
	// never the file at os.Executable()'s path, which an agent may have
	// replaced. NewSupervisor fails with ErrUnsupported if it cannot be
	// found or is not executable.
	GuardianPath string
}
