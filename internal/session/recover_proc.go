//go:build linux || darwin

package session

import (
	"os"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/tablemode"
)

// RecoverLeftover kills what is left of one ledger entry with the
// recovery of the containment that wrote it: process-table entries with
// the process table's own rules (tablemode.Recover), the others with
// reaper.Recover (cgroup, process group and marker).
func RecoverLeftover(containment string, l reaper.Leftover, grace time.Duration) (reaper.Termination, error) {
	if containment == string(reaper.ModeProcessTable) {
		return tablemode.Recover(l, grace)
	}
	return reaper.Recover(l, grace)
}

// Recover is RecoverLeftover (Recoverer).
func (reaperLauncher) Recover(containment string, l reaper.Leftover, grace time.Duration) (reaper.Termination, error) {
	return RecoverLeftover(containment, l, grace)
}

// selfStart is this sidecar's start time (proctable.StartTime), recorded in every
// ledger entry so a later sidecar can tell a live owner from a recycled pid.
var selfStart, _ = proctable.StartTime(os.Getpid())
