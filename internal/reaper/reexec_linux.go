//go:build linux

package reaper

import "github.com/acpx-sidecar/acpx-sidecar/internal/guardian"

// guardianEntry runs a GuardianArg re-execution: the watchdog when
// args[0] is watchdogArg, else the guardian program.
func guardianEntry(args []string) int {
	if len(args) > 0 && args[0] == watchdogArg {
		return watchdogMain()
	}
	return guardian.Main(args)
}

// Guardian timing, the guardian program's (internal/guardian).
const guardianGiveUp = guardian.GiveUp
