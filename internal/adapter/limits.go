package adapter

import (
	"strconv"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// effectiveLimits are the limits of one open (docs/protocol.md §18.2):
// each member the open's limits give (0 included, meaning none) wins
// over Config.DefaultLimits (--default-*).
func (m *Manager) effectiveLimits(p protocol.OpenParams) reaper.Limits {
	pick := func(open, def *int64) int64 {
		switch {
		case open != nil:
			return *open
		case def != nil:
			return *def
		}
		return 0
	}
	var o protocol.Limits
	if p.Limits != nil {
		o = *p.Limits
	}
	d := m.cfg.DefaultLimits
	return reaper.Limits{MemoryBytes: pick(o.MemoryBytes, d.MemoryBytes), Pids: pick(o.Pids, d.Pids),
		CPUPercent: pick(o.CPUPercent, d.CPUPercent)}
}

// checkLimits refuses, before anything is written or launched, limits
// the containment in force cannot enforce: PLATFORM_UNSUPPORTED
// (docs/protocol.md §18.2). In cgroup mode a limit is enforceable where
// the cgroup2 hierarchy offers its controller or, on a hybrid host, a
// cgroup v1 hierarchy holds it (cgroup.LimitsSupported, of
// internal/reaper/cgroup). A limit the check passes may still fail at
// the launch (the provider cgroup's controllers are enabled then); that
// too launches nothing and is PLATFORM_UNSUPPORTED.
func (m *Manager) checkLimits(l reaper.Limits) *protocol.Error {
	if !l.Any() {
		return nil
	}
	if mode := m.cfg.Launcher.Mode(); mode != reaper.ModeCgroup {
		return protocol.Domain(protocol.ErrPlatformUnsupported, "limits need cgroup containment; this sidecar runs in "+string(mode)+" mode", false)
	}
	if m.cfg.LimitsSupported != nil {
		if ok, why := m.cfg.LimitsSupported(l); !ok {
			return protocol.Domain(protocol.ErrPlatformUnsupported, "limits cannot be enforced: "+why, false)
		}
	}
	return nil
}

// resources reads the live tree's cgroup counters for session/status; nil
// without a cgroup or once it is gone.
func resourcesOf(t Tree) *protocol.Resources {
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
func oomKills(t Tree) int64 {
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
