//go:build linux || darwin

package adapter

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
)

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
