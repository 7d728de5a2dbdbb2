//go:build linux

package tablemode

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctest"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
)

// TestMain runs the package tests. Like cmd/acpx-sidecar's main, it first
// hands a guardian re-execution of this test binary (the reaper.Supervisor
// of TestNew_RefusedWhileSupervisorReaps uses the default GuardianPath)
// over to the guardian.
func TestMain(m *testing.M) {
	if reaper.MaybeRunGuardian() {
		return
	}
	goleak.VerifyTestMain(m)
}

const (
	termGrace = 200 * time.Millisecond
	killGrace = 2 * time.Second // generous: a bound, not a timed assertion
)

// newSup makes a reaper.Supervisor (this process a child subreaper first)
// and registers, LIFO, its Close and a safety net that kills (via pidfd)
// anything a failed test left with its marker.
func newSup(t *testing.T, mode reaper.Mode, mark string) *reaper.Supervisor {
	t.Helper()
	if err := reaper.BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	s, err := reaper.NewSupervisor(reaper.Options{Mode: mode})
	if err != nil {
		t.Skipf("mode %s unavailable: %v", mode, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	proctest.KillAliveOnCleanup(t, mark)
	return s
}

func findProc(term reaper.Termination, pid int) (reaper.ProcessRecord, bool) {
	for _, p := range term.Processes {
		if p.Pid == pid {
			return p, true
		}
	}
	return reaper.ProcessRecord{}, false
}

func sigNames(term reaper.Termination) []string {
	var out []string
	for _, s := range term.Signals {
		out = append(out, s.Signal)
	}
	return out
}
