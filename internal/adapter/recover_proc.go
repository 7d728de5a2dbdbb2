//go:build linux || darwin

package adapter

import (
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/tablemode"
)

// recoverLeftover kills what is left of one ledger entry with the
// recovery of the containment that wrote it: process-table entries with
// the process table's own rules (tablemode.Recover), the others with
// reaper.Recover (cgroup, process group and marker).
func recoverLeftover(containment string, l reaper.Leftover, grace time.Duration) (reaper.Termination, error) {
	if containment == string(reaper.ModeProcessTable) {
		return tablemode.Recover(l, grace)
	}
	return reaper.Recover(l, grace)
}

// Recover is recoverLeftover (Recoverer).
func (reaperLauncher) Recover(containment string, l reaper.Leftover, grace time.Duration) (reaper.Termination, error) {
	return recoverLeftover(containment, l, grace)
}

// procStart is pid's start time as the process table gives it
// (proctable.Proc.Start: on Linux the same clock ticks as /proc/<pid>/stat
// field 22), and whether a live (non-zombie) process has that pid. The
// ledger keeps it for the sidecar itself, so a later sidecar can tell a
// live owner from a recycled pid on Linux and on macOS alike.
func procStart(pid int) (uint64, bool) {
	r, err := proctable.New()
	if err != nil {
		return 0, false
	}
	p, err := r.Stat(pid)
	if err != nil || p.Zombie {
		return 0, false
	}
	return p.Start, true
}
