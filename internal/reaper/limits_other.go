//go:build !linux

package reaper

// Resources fails on this platform: there is no cgroup.
func (t *Tree) Resources() (Resources, error) { return Resources{}, ErrUnsupported }

// LimitsSupported is false on this platform (docs/rules.md#r2).
func LimitsSupported(Limits) (bool, string) { return false, "requires Linux cgroup v2" }

// limitsExecMain: there are no cgroup v1 limits on this platform.
func limitsExecMain([]string) int { return 2 }

// LimitsMechanism is "" on this platform: no limit can be enforced.
func LimitsMechanism(Limits) string { return "" }
