package launch

import (
	"context"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
)

// The sessions' view of containment (internal/reaper), in the style of
// hashicorp/go-plugin's runner.Runner: the two interfaces below list only
// what the session actors and their workers call. Production passes
// ReaperLauncher(sup); tests pass fakes that run no process. The data
// types (reaper.Spec, reaper.Mode, reaper.Termination, reaper.ExitStatus)
// are reaper's, so a fake reports the same facts a real tree does.

// Launcher starts provider trees under containment (a *reaper.Supervisor
// through ReaperLauncher).
type Launcher interface {
	// Start launches spec inside its own containment unit. It fails with
	// reaper.ErrSealed after Seal (docs/rules.md#r21).
	Start(spec reaper.Spec) (Tree, error)
	// Mode is the containment in force; its string is a proof's and
	// initialize's `containment`.
	Mode() reaper.Mode
	// Seal makes every later Start fail; shutdown calls it first.
	Seal()
	// CgroupParent is the cgroup directory provider cgroups are made in
	// ("" outside cgroup mode); the ownership ledger records it.
	CgroupParent() string
}

// Tree is one launched provider and everything it spawns (a *reaper.Tree
// or *tablemode.Tree).
type Tree interface {
	// Stdio is the provider's pipes: the ACP connection writes Stdin and
	// reads Stdout; Stderr is drained, never logged.
	Stdio() reaper.Stdio
	// Info is the tree's identity: pids, start time, containment, cgroup.
	Info() reaper.TreeInfo
	// Exited is closed once the leader has been reaped.
	Exited() <-chan struct{}
	// ExitStatus is the leader's wait status, valid after Exited.
	ExitStatus() reaper.ExitStatus
	// Resources reads the tree's cgroup counters (docs/protocol.md
	// §18.2); an error without a cgroup or once it is gone.
	Resources() (reaper.Resources, error)
	// Terminate ends the whole tree (TERM, then KILL) and returns what was
	// observed; it may be called again after an incomplete result (the
	// retained cleanup, docs/rules.md#r20), and its facts are cumulative.
	Terminate(ctx context.Context, termGrace, killGrace time.Duration) reaper.Termination
}

// Recoverer is implemented by a Launcher that also ends what a dead
// sidecar left (ReaperLauncher does): recovery of a ledger entry
// (internal/adapter/recover.go) goes through the Launcher as a live
// launch does, so a fake launcher fakes recovery too. A Launcher without it (or none) recovers
// with Recover directly.
type Recoverer interface {
	// Recover kills what is provably left of l, a tree the containment
	// mode named wrote, waiting grace for its exit. Errors:
	// reaper.ErrUnprovable (the entry names nothing recovery can prove).
	Recover(containment string, l reaper.Leftover, grace time.Duration) (reaper.Termination, error)
}

// The concrete reaper types satisfy the interfaces.
var (
	_ Tree      = (*reaper.Tree)(nil)
	_ Launcher  = reaperLauncher{}
	_ Recoverer = reaperLauncher{}
)

// ReaperLauncher adapts a *reaper.Supervisor to Launcher (its Start
// returns the concrete *reaper.Tree). sup must not be nil: a sidecar
// without containment leaves config.Config.Launcher nil instead.
func ReaperLauncher(sup *reaper.Supervisor) Launcher { return reaperLauncher{sup} }

// reaperLauncher is a *reaper.Supervisor as a Launcher.
type reaperLauncher struct{ *reaper.Supervisor }

// Start launches spec; a failed launch is a nil Tree (not a nil
// *reaper.Tree in an interface).
func (l reaperLauncher) Start(spec reaper.Spec) (Tree, error) {
	t, err := l.Supervisor.Start(spec)
	if err != nil {
		return nil, err
	}
	return t, nil
}
