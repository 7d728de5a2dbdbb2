package launch

import (
	"strconv"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// ResourcesOf reads the live tree's cgroup counters for session/status
// (docs/protocol.md §18.2); nil without a cgroup or once it is gone.
func ResourcesOf(t Tree) *protocol.Resources {
	if t == nil || t.Info().CgroupPath == "" {
		return nil
	}
	r, err := t.Resources()
	if err != nil {
		return nil
	}
	return &protocol.Resources{MemoryCurrent: r.MemoryCurrent, MemoryMax: r.MemoryMax, PidsCurrent: r.PidsCurrent,
		PidsMax: r.PidsMax, OomKills: r.OomKills, PidsLimitHits: r.PidsLimitHits}
}

// OOMKills is the tree's oom_kill count (memory.events, or
// memory.oom_control where the memory limit is in cgroup v1; 0 without a
// cgroup or once it is gone).
func OOMKills(t Tree) int64 {
	if r := ResourcesOf(t); r != nil {
		return r.OomKills
	}
	return 0
}

// OOMProofError is the proof error of a tree whose processes the OOM
// killer killed n times at its memory limit (docs/protocol.md §18.2).
func OOMProofError(n int64) protocol.ProofError {
	return protocol.ProofError{Code: protocol.ErrProviderOOM,
		Message: "the kernel OOM killer killed " + strconv.FormatInt(n, 10) + " process(es) of the tree at its memory limit (cgroup oom_kill count)"}
}

// ExitReason is session/exited `reason`: "oom" when the OOM killer has
// killed a process of the tree, else "signal" or "exit" from the leader's
// wait status (docs/protocol.md §18.2).
func ExitReason(st reaper.ExitStatus, ooms int64) string {
	switch {
	case ooms > 0:
		return protocol.ExitReasonOOM
	case st.Signal != "":
		return protocol.ExitReasonSignal
	}
	return protocol.ExitReasonExit
}
