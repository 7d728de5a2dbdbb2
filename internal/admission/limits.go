package admission

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Limits are the limits of one open (docs/protocol.md §18.2): each
// member the open's limits give (0 included, meaning none) wins over
// st.DefaultLimits (--default-*).
func (st Settings) Limits(p protocol.OpenParams) reaper.Limits {
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
	d := st.DefaultLimits
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
func (st Settings) checkLimits(l reaper.Limits) *protocol.Error {
	if !l.Any() {
		return nil
	}
	if mode := st.Mode; mode != reaper.ModeCgroup {
		return protocol.Domain(protocol.ErrPlatformUnsupported, "limits need cgroup containment; this sidecar runs in "+string(mode)+" mode", false)
	}
	if st.LimitsSupported != nil {
		if ok, why := st.LimitsSupported(l); !ok {
			return protocol.Domain(protocol.ErrPlatformUnsupported, "limits cannot be enforced: "+why, false)
		}
	}
	return nil
}
