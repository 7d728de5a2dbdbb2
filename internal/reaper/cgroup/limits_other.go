//go:build !linux

package cgroup

// LimitsSupported is false on this platform (docs/rules.md#r2).
func LimitsSupported(Limits) (bool, string) { return false, "requires Linux cgroup v2" }

// LimitsMechanism is "" on this platform: no limit can be enforced.
func LimitsMechanism(Limits) string { return "" }
