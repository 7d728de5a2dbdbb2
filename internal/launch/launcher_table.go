//go:build linux || darwin

package launch

import (
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/tablemode"
)

// The process-table tree satisfies Tree.
var _ Tree = (*tablemode.Tree)(nil)

// TableLauncher adapts a *tablemode.Supervisor (process-table
// containment, docs/operations.md "macOS") to Launcher. sup must not be
// nil.
func TableLauncher(sup *tablemode.Supervisor) Launcher { return tableLauncher{sup} }

// tableLauncher is a *tablemode.Supervisor as a Launcher.
type tableLauncher struct{ *tablemode.Supervisor }

// Start launches spec; a failed launch is a nil Tree.
func (l tableLauncher) Start(spec reaper.Spec) (Tree, error) {
	t, err := l.Supervisor.Start(spec)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Recover kills what is left of one ledger entry (l, written by a tree of
// containment) with the recovery of that containment, waiting grace for
// its exit: process-table entries with the process table's own rules
// (tablemode.Recover), the others with reaper.Recover (cgroup, process
// group and marker). Errors: reaper.ErrUnprovable and the recoveries'
// own.
func Recover(containment string, l reaper.Leftover, grace time.Duration) (reaper.Termination, error) {
	if containment == string(reaper.ModeProcessTable) {
		return tablemode.Recover(l, grace)
	}
	return reaper.Recover(l, grace)
}

// Recover is the package's Recover (Recoverer).
func (reaperLauncher) Recover(containment string, l reaper.Leftover, grace time.Duration) (reaper.Termination, error) {
	return Recover(containment, l, grace)
}
