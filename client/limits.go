package client

// Limits are session/open `limits` (docs/protocol.md §16.2): MemoryBytes
// → the provider cgroup's memory.max, Pids → pids.max, CPUPercent →
// cpu.max in percent of one CPU. A zero member is left out of the frame,
// so the sidecar's --default-* flag for that kind applies (none unless
// set).
type Limits struct {
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	Pids        int64 `json:"pids,omitempty"`
	CPUPercent  int64 `json:"cpuPercent,omitempty"`
}

// Resources is session/status `resources` (docs/protocol.md §16.2):
// memory.current and memory.max in bytes, pids.current and pids.max (a
// nil max is unlimited), and the oom_kill and pids max event counters.
type Resources struct {
	MemoryCurrent *int64 `json:"memoryCurrent"`
	MemoryMax     *int64 `json:"memoryMax"`
	PidsCurrent   *int64 `json:"pidsCurrent"`
	PidsMax       *int64 `json:"pidsMax"`
	OomKills      int64  `json:"oomKills"`
	PidsLimitHits int64  `json:"pidsLimitHits"`
}
