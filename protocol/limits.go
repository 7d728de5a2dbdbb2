package protocol

import (
	"strconv"
	"strings"
)

// Environment policies of --inherit-env (docs/protocol.md §18.1): what a
// provider takes from the sidecar's own environment before the open's
// inheritEnv names and env are applied.
const (
	// InheritMinimal: only MinimalEnvNames and LC_* (the default).
	InheritMinimal = "minimal"
	// InheritAll: the whole environment (the default before issue 12).
	InheritAll = "all"
	// InheritNone: nothing.
	InheritNone = "none"
)

// MinimalEnvNames are the variables the minimal policy passes through,
// besides every LC_* (docs/protocol.md §18.1).
var MinimalEnvNames = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TZ", "TMPDIR"}

// InMinimalEnv reports whether the minimal policy passes the variable
// name through (docs/protocol.md §18.1).
func InMinimalEnv(name string) bool {
	if strings.HasPrefix(name, "LC_") {
		return true
	}
	for _, n := range MinimalEnvNames {
		if n == name {
			return true
		}
	}
	return false
}

// Limits are the per-session resource limits of session/open `limits`
// (docs/protocol.md §18.2), enforced on the provider's cgroup: MemoryBytes
// → memory.max (bytes), Pids → pids.max (processes and threads),
// CpuPercent → cpu.max (percent of one CPU; 200 = two CPUs). A zero
// member means no limit of that kind; a nil one leaves it to the
// --default-* flag (itself 0, no limit, unless set).
type Limits struct {
	// MemoryBytes is memory.max in bytes: 0 (no limit) or
	// MinMemoryBytes-MaxMemoryBytes; nil: --default-memory-bytes.
	MemoryBytes *int64 `json:"memoryBytes,omitempty"`
	// Pids is pids.max, processes and threads of the tree together: 0 (no
	// limit) or MinPids-MaxPids; nil: --default-pids.
	Pids *int64 `json:"pids,omitempty"`
	// CPUPercent is cpu.max in percent of one CPU (200 = two CPUs): 0 (no
	// limit) or MinCPUPercent-MaxCPUPercent; nil: --default-cpu-percent.
	CPUPercent *int64 `json:"cpuPercent,omitempty"`
	// Connections bounds the connections the tree may have open at once
	// through `sandbox.network.allow` (MinConnections-MaxConnections;
	// DefaultConnections when absent; docs/protocol.md §19.1). It is no
	// cgroup limit: Any does not count it, and it means nothing without
	// an allow list.
	Connections *int64 `json:"connections,omitempty"`
}

// Any reports whether l sets at least one non-zero cgroup limit
// (memoryBytes, pids, cpuPercent).
func (l *Limits) Any() bool {
	return l != nil && (nz(l.MemoryBytes) || nz(l.Pids) || nz(l.CPUPercent))
}

func nz(p *int64) bool { return p != nil && *p != 0 }

// Upper bounds of the limits (docs/protocol.md §18.2): anything larger is
// -32602. The lower bounds keep a limit from making the provider
// unstartable: a memory.max below 1 MiB, or pids.max below 2 (the
// provider and one child), is refused.
const (
	MinMemoryBytes = 1 << 20
	MaxMemoryBytes = 1 << 50
	MinPids        = 2
	MaxPids        = 4194304
	MinCPUPercent  = 1
	MaxCPUPercent  = 100000
)

func (l *Limits) validate() *Error {
	if l == nil {
		return nil
	}
	for _, c := range []struct {
		field    string
		v        *int64
		min, max int64
	}{{"limits.memoryBytes", l.MemoryBytes, MinMemoryBytes, MaxMemoryBytes},
		{"limits.pids", l.Pids, MinPids, MaxPids},
		{"limits.cpuPercent", l.CPUPercent, MinCPUPercent, MaxCPUPercent}} {
		if c.v != nil && *c.v != 0 && (*c.v < c.min || *c.v > c.max) {
			return InvalidParams(c.field, c.field+" must be 0 (no limit) or "+strconv.FormatInt(c.min, 10)+"-"+strconv.FormatInt(c.max, 10))
		}
	}
	if c := l.Connections; c != nil && (*c < MinConnections || *c > MaxConnections) {
		return InvalidParams("limits.connections", "limits.connections must be "+strconv.Itoa(MinConnections)+"-"+strconv.Itoa(MaxConnections)+
			" (connections open at once; there is no unbounded setting)")
	}
	return nil
}

// Resources is session/status `resources` (docs/protocol.md §18.2): the
// provider cgroup's memory.current and memory.max (bytes), pids.current
// and pids.max (-1 = "max", unlimited; null where that controller is not
// enabled for the tree), the oom_kill counter of memory.events and the
// max counter of pids.events (on a hybrid host, the v1 limit cgroup's
// equivalents). Absent from status when the session has no cgroup or it
// is gone.
type Resources struct {
	// MemoryCurrent is the tree's memory use in bytes (memory.current;
	// v1 memory.usage_in_bytes); null without the memory controller.
	MemoryCurrent *int64 `json:"memoryCurrent"`
	// MemoryMax is the memory limit in bytes (memory.max; v1
	// memory.limit_in_bytes), -1 when unlimited; null without the memory
	// controller.
	MemoryMax *int64 `json:"memoryMax"`
	// PidsCurrent is the tree's task count (pids.current); null without
	// the pids controller.
	PidsCurrent *int64 `json:"pidsCurrent"`
	// PidsMax is the task limit (pids.max), -1 when unlimited; null
	// without the pids controller.
	PidsMax *int64 `json:"pidsMax"`
	// OomKills counts the OOM killer's kills in the tree so far
	// (memory.events oom_kill; v1 memory.oom_control); 0 when unreadable.
	OomKills int64 `json:"oomKills"`
	// PidsLimitHits counts the forks refused at pids.max so far (the max
	// counter of pids.events); 0 when unreadable.
	PidsLimitHits int64 `json:"pidsLimitHits"`
}

// session/exited `reason` values (docs/protocol.md §18.2).
const (
	// ExitReasonExit: the provider exited with a status.
	ExitReasonExit = "exit"
	// ExitReasonSignal: a signal ended it.
	ExitReasonSignal = "signal"
	// ExitReasonOOM: the kernel's OOM killer ended a process of the tree
	// at its memory limit.
	ExitReasonOOM = "oom"
)

// ErrProviderOOM is the proof error code of a tree in which the OOM
// killer killed a process at the session's memory limit (docs/protocol.md
// §18.2).
const ErrProviderOOM DataCode = "PROVIDER_OOM"

// Permission bound (docs/protocol.md §18.3).
const (
	// DefaultPermissionTimeoutMs bounds a host escalation (10 minutes).
	DefaultPermissionTimeoutMs = 600000
	// MaxPermissionTimeoutMs is the largest permissionTimeoutMs (24 h).
	MaxPermissionTimeoutMs = 24 * 60 * 60 * 1000
	// DecisionTimeout is session/permission `decision` of an escalation
	// the host did not answer within permissionTimeoutMs.
	DecisionTimeout Decision = "timeout"
)

// MaxProofProcesses caps Proof.Processes; the rest are counted in
// Proof.ProcessesOmitted (docs/protocol.md §18.4).
const MaxProofProcesses = 256

// validateSafety checks the issue-12 members of OpenParams: inheritEnv
// names, limits and permissionTimeoutMs (docs/protocol.md §18).
func (p *OpenParams) validateSafety() *Error {
	for i, k := range p.InheritEnv {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return InvalidParams("inheritEnv."+strconv.Itoa(i), "inheritEnv names must be non-empty and contain no '=' or NUL")
		}
	}
	if e := p.Limits.validate(); e != nil {
		return e
	}
	if t := p.PermissionTimeoutMs; t != nil && (*t < 1 || *t > MaxPermissionTimeoutMs) {
		return InvalidParams("permissionTimeoutMs", "permissionTimeoutMs must be 1-86400000")
	}
	if t := p.ElicitationTimeoutMs; t != nil && (*t < 1 || *t > MaxPermissionTimeoutMs) {
		return InvalidParams("elicitationTimeoutMs", "elicitationTimeoutMs must be 1-86400000")
	}
	return nil
}
