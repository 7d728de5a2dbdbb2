//go:build linux || darwin

package adapter

import "github.com/acpx-sidecar/acpx-sidecar/internal/reaper"

// The process-table tree satisfies the adapter's Tree interface.
var _ Tree = (*reaper.TableTree)(nil)

// TableLauncher adapts a *reaper.TableSupervisor (process-table
// containment, docs/operations.md "macOS") to Launcher. sup must not be
// nil.
func TableLauncher(sup *reaper.TableSupervisor) Launcher { return tableLauncher{sup} }

// tableLauncher is a *reaper.TableSupervisor as a Launcher.
type tableLauncher struct{ *reaper.TableSupervisor }

// Start launches spec; a failed launch is a nil Tree.
func (l tableLauncher) Start(spec reaper.Spec) (Tree, error) {
	t, err := l.TableSupervisor.Start(spec)
	if err != nil {
		return nil, err
	}
	return t, nil
}
