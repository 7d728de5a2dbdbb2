//go:build linux || darwin

package session

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/tablemode"
)

// The process-table tree satisfies the adapter's Tree interface.
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
