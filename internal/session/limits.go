package session

import (
	"strconv"

	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// resources reads the live tree's cgroup counters for session/status; nil
// without a cgroup or once it is gone.
func resourcesOf(t launch.Tree) *protocol.Resources {
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

// oomKills is the tree's oom_kill count (memory.events, or
// memory.oom_control where the memory limit is in cgroup v1; 0 without a
// cgroup or once it is gone).
func oomKills(t launch.Tree) int64 {
	if r := resourcesOf(t); r != nil {
		return r.OomKills
	}
	return 0
}

// oomProofError is the proof error of a tree whose processes the OOM
// killer killed n times at its memory limit (docs/protocol.md §18.2).
func oomProofError(n int64) protocol.ProofError {
	return protocol.ProofError{Code: protocol.ErrProviderOOM,
		Message: "the kernel OOM killer killed " + strconv.FormatInt(n, 10) + " process(es) of the tree at its memory limit (cgroup oom_kill count)"}
}

// exitReason is session/exited `reason`: "oom" when the OOM killer has
// killed a process of the tree, else "signal" or "exit" from the leader's
// wait status (docs/protocol.md §18.2).
func exitReason(st reaper.ExitStatus, ooms int64) string {
	switch {
	case ooms > 0:
		return protocol.ExitReasonOOM
	case st.Signal != "":
		return protocol.ExitReasonSignal
	}
	return protocol.ExitReasonExit
}
