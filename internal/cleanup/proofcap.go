package cleanup

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// capProcesses adds the processes of procs that proof does not list yet,
// at most protocol.MaxProofProcesses in all; the others are counted in
// proof.ProcessesOmitted (docs/protocol.md §18.4). procs are a
// Termination's cumulative facts, so the count of one call covers every
// earlier one: the largest count is kept.
func capProcesses(proof *protocol.Proof, procs []reaper.ProcessRecord) {
	seen := make(map[int]bool, len(proof.Processes))
	for _, pr := range proof.Processes {
		seen[pr.Pid] = true
	}
	omitted := 0
	for _, p := range procs {
		if seen[p.Pid] {
			continue
		}
		seen[p.Pid] = true
		if len(proof.Processes) >= protocol.MaxProofProcesses {
			omitted++
			continue
		}
		pp := protocol.ProofProcess{Pid: p.Pid, Role: p.Role, ExitCode: p.ExitCode,
			Signal: p.Signal, ReapedBy: p.ReapedBy, ExitedAt: protocol.At(p.ExitedAt)}
		if pp.ExitCode == nil && pp.Signal == "" {
			pp.ReapedBy = protocol.ReapedByParent // docs/protocol.md §21: never none of them
		}
		proof.Processes = append(proof.Processes, pp)
	}
	if omitted > proof.ProcessesOmitted {
		proof.ProcessesOmitted = omitted
	}
}
