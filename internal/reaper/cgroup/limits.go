package cgroup

import "errors"

// Limits are the resource limits of one provider cgroup (reaper.Spec.Limits;
// docs/protocol.md §18.2): MemoryBytes → memory.max (and memory.swap.max
// 0, so the limit cannot be evaded into swap), Pids → pids.max,
// CPUPercent → cpu.max as "<percent×1000> 100000" (percent of one CPU).
// On a hybrid host whose cgroup2 hierarchy lacks a controller, that kind
// goes into a cgroup v1 cgroup of the provider instead
// (memory.limit_in_bytes and memory.memsw.limit_in_bytes, pids.max,
// cpu.cfs_quota_us over cpu.cfs_period_us 100000; limits_v1_linux.go).
// Zero means no limit of that kind.
type Limits struct {
	// MemoryBytes is the memory limit in bytes (memory.max); 0: none.
	MemoryBytes int64
	// Pids is the most tasks the cgroup may hold (pids.max); 0: none.
	Pids int64
	// CPUPercent is the CPU limit in percent of one CPU (cpu.max); 0: none.
	CPUPercent int64
}

// Any reports whether l sets a limit.
func (l Limits) Any() bool { return l.MemoryBytes != 0 || l.Pids != 0 || l.CPUPercent != 0 }

// ErrLimitsUnsupported: reaper.Spec.Limits were given but the
// containment cannot enforce them (not cgroup mode, or a controller is
// available neither in the cgroup2 hierarchy nor in a writable cgroup v1
// one). Nothing was launched; the caller reports PLATFORM_UNSUPPORTED
// (docs/protocol.md §18.2).
var ErrLimitsUnsupported = errors.New("reaper: resource limits cannot be enforced here")

// Resources are a provider cgroup's counters (reaper.Tree.Resources;
// docs/protocol.md §18.2 session/status resources): memory.current,
// memory.max, pids.current and pids.max (-1 = "max", unlimited; nil
// pointers where the controller is not enabled), the oom_kill count of
// memory.events and the max count of pids.events; for a kind whose limit
// is in cgroup v1, memory.usage_in_bytes, memory.limit_in_bytes, oom_kill
// of memory.oom_control, and the v1 pids files of the same names.
type Resources struct {
	// MemoryCurrent is memory.current in bytes; nil: no memory controller.
	MemoryCurrent *int64
	// MemoryMax is memory.max in bytes, -1 unlimited; nil: no memory
	// controller.
	MemoryMax *int64
	// PidsCurrent is pids.current, a task count; nil: no pids controller.
	PidsCurrent *int64
	// PidsMax is pids.max, a task count, -1 unlimited; nil: no pids
	// controller.
	PidsMax *int64
	// OomKills is memory.events oom_kill, the OOM kills so far (0 when
	// unreadable).
	OomKills int64
	// PidsLimitHits is pids.events max, the forks refused at PidsMax so
	// far (0 when unreadable).
	PidsLimitHits int64
}
