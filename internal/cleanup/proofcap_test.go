package cleanup

import (
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestCapProcesses_KeepsTheFirst256AndCountsTheRest (docs/protocol.md
// §18.4): a fork chain of 1000 processes gives 256 entries and
// processesOmitted 744, and a retry that reports the same cumulative
// facts again adds and counts nothing twice.
func TestCapProcesses_KeepsTheFirst256AndCountsTheRest(t *testing.T) {
	procs := make([]reaper.ProcessRecord, 1000)
	for i := range procs {
		procs[i] = reaper.ProcessRecord{Pid: 1000 + i, Role: "descendant", ExitedAt: time.Now()}
	}
	var p protocol.Proof
	capProcesses(&p, procs[:300])
	if len(p.Processes) != 256 || p.ProcessesOmitted != 44 {
		t.Fatalf("after 300: %d entries, %d omitted; want 256, 44", len(p.Processes), p.ProcessesOmitted)
	}
	capProcesses(&p, procs) // a retry's cumulative facts
	capProcesses(&p, procs)
	if len(p.Processes) != 256 || p.ProcessesOmitted != 744 {
		t.Fatalf("after 1000 twice: %d entries, %d omitted; want 256, 744", len(p.Processes), p.ProcessesOmitted)
	}
	if p.Processes[0].Pid != 1000 || p.Processes[255].Pid != 1255 {
		t.Errorf("kept pids %d..%d, want the first 256 (1000..1255)", p.Processes[0].Pid, p.Processes[255].Pid)
	}
}
