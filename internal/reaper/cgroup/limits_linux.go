//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// limitControllers are the cgroup v2 controllers Limits need, by kind.
func limitControllers(l Limits) []string {
	var c []string
	if l.MemoryBytes != 0 {
		c = append(c, "memory")
	}
	if l.Pids != 0 {
		c = append(c, "pids")
	}
	if l.CPUPercent != 0 {
		c = append(c, "cpu")
	}
	return c
}

// ApplyLimits writes the v2 part of l into the (still empty) provider
// cgroup cgroupDir, before anything is forked into it, and plans the rest
// (PlanLimits): the controllers plan.V2 names are enabled in
// cgroup.subtree_control of the cgroup2 mount root and every ancestor
// down to cgroupDir's parent, then memory.max (memory.swap.max 0 where
// present), pids.max and cpu.max are written; the controllers of plan.V1
// are the caller's (MakeV1Limits). Errors: ErrLimitsUnsupported (wrapped,
// with the reason) when cgroupDir is "" (no cgroup mode) or a controller
// is available in neither hierarchy; a write error otherwise.
func ApplyLimits(cgroupDir string, l Limits) (Plan, error) {
	if !l.Any() {
		return Plan{}, nil
	}
	if cgroupDir == "" {
		return Plan{}, fmt.Errorf("%w: the containment is not cgroup mode", ErrLimitsUnsupported)
	}
	plan, err := PlanLimits(l)
	if err != nil {
		return plan, err
	}
	if len(plan.V2) == 0 {
		return plan, nil
	}
	if err := enableControllers(filepath.Dir(cgroupDir), plan.V2); err != nil {
		return plan, err
	}
	inV2 := map[string]bool{}
	for _, c := range plan.V2 {
		inV2[c] = true
	}
	writes := [][2]string{}
	if inV2["memory"] {
		writes = append(writes, [2]string{"memory.max", strconv.FormatInt(l.MemoryBytes, 10)})
		if _, err := os.Stat(filepath.Join(cgroupDir, "memory.swap.max")); err == nil {
			writes = append(writes, [2]string{"memory.swap.max", "0"})
		}
	}
	if inV2["pids"] {
		writes = append(writes, [2]string{"pids.max", strconv.FormatInt(l.Pids, 10)})
	}
	if inV2["cpu"] {
		writes = append(writes, [2]string{"cpu.max", strconv.FormatInt(l.CPUPercent*1000, 10) + " 100000"})
	}
	for _, w := range writes {
		if err := os.WriteFile(filepath.Join(cgroupDir, w[0]), []byte(w[1]), 0); err != nil {
			return plan, fmt.Errorf("reaper: write %s: %w", w[0], err)
		}
	}
	return plan, nil
}

// enableControllers makes each controller of need available in dir's
// children: it walks from the cgroup2 mount root down to dir and, in each
// cgroup whose cgroup.subtree_control lacks one, writes "+<controller>"
// (the root's offer, cgroup.controllers, is checked first).
func enableControllers(dir string, need []string) error {
	mount, err := Mount()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrLimitsUnsupported, err)
	}
	rel, err := filepath.Rel(mount, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%w: %s is not below the cgroup2 mount %s", ErrLimitsUnsupported, dir, mount)
	}
	offered := fields(filepath.Join(mount, "cgroup.controllers"))
	for _, c := range need {
		if !offered[c] {
			return fmt.Errorf("%w: the cgroup2 hierarchy at %s offers no %s controller (cgroup.controllers: %q)",
				ErrLimitsUnsupported, mount, c, strings.TrimSpace(readSmall(filepath.Join(mount, "cgroup.controllers"))))
		}
	}
	chain := []string{mount}
	if rel != "." {
		cur := mount
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			cur = filepath.Join(cur, part)
			chain = append(chain, cur)
		}
	}
	for _, d := range chain {
		on := fields(filepath.Join(d, "cgroup.subtree_control"))
		for _, c := range need {
			if on[c] {
				continue
			}
			if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+"+c), 0); err != nil {
				return fmt.Errorf("%w: enable %s in %s/cgroup.subtree_control: %v", ErrLimitsUnsupported, c, d, err)
			}
		}
	}
	return nil
}

// LimitsSupported reports whether a provider cgroup can get every kind
// of limit in l, and if not, why (for doctor, and to refuse an open
// before anything is written; docs/protocol.md §18.2). It changes
// nothing: a controller is available when the cgroup2 mount root offers
// it (cgroup.controllers; ApplyLimits then enables it down the chain), or
// else when a writable cgroup v1 hierarchy holds it (a hybrid host;
// limits_v1_linux.go). LimitsMechanism names which.
func LimitsSupported(l Limits) (bool, string) {
	if !l.Any() {
		return true, ""
	}
	if _, err := PlanLimits(l); err != nil {
		return false, strings.TrimPrefix(err.Error(), ErrLimitsUnsupported.Error()+": ")
	}
	return true, ""
}

// ReadResources reads the counters of a provider's cgroups
// (docs/protocol.md §18.2; reaper.Tree.Resources): from its v2 cgroup
// cgroupDir, and for a controller whose limit is in a cgroup v1 hierarchy
// (v1: controller → directory, as MakeV1Limits returns it; nil if none),
// from that v1 cgroup. Errors: no cgroup (cgroupDir "", not cgroup mode),
// or the cgroup is gone.
func ReadResources(cgroupDir string, v1 map[string]string) (Resources, error) {
	r, err := readResources(cgroupDir)
	if err == nil && len(v1) > 0 {
		readV1Resources(&r, v1)
	}
	return r, err
}

// readResources reads memory.current, memory.max, pids.current, pids.max,
// memory.events oom_kill and pids.events max of cgroupDir. A controller
// that is not enabled there leaves its members nil.
func readResources(cgroupDir string) (Resources, error) {
	var r Resources
	if cgroupDir == "" {
		return r, errors.New("reaper: no cgroup")
	}
	if _, err := os.Stat(filepath.Join(cgroupDir, "cgroup.procs")); err != nil {
		return r, err
	}
	r.MemoryCurrent = readNum(filepath.Join(cgroupDir, "memory.current"))
	r.MemoryMax = readNum(filepath.Join(cgroupDir, "memory.max"))
	r.PidsCurrent = readNum(filepath.Join(cgroupDir, "pids.current"))
	r.PidsMax = readNum(filepath.Join(cgroupDir, "pids.max"))
	r.OomKills = eventCount(filepath.Join(cgroupDir, "memory.events"), "oom_kill")
	r.PidsLimitHits = eventCount(filepath.Join(cgroupDir, "pids.events"), "max")
	return r, nil
}

// readNum reads a cgroup number file: nil when missing or unparsable, -1
// for "max".
func readNum(path string) *int64 {
	s := strings.TrimSpace(readSmall(path))
	if s == "" {
		return nil
	}
	if s == "max" {
		v := int64(-1)
		return &v
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	return &v
}

// eventCount reads "<key> <n>" from a flat-keyed cgroup events file.
func eventCount(path, key string) int64 {
	return parseEventCount(readSmall(path), key)
}

// parseEventCount finds "<key> <n>" in flat-keyed cgroup text; 0 if
// absent.
func parseEventCount(text, key string) int64 {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// fields reads a space-separated cgroup list file as a set.
func fields(path string) map[string]bool {
	out := map[string]bool{}
	for _, f := range strings.Fields(readSmall(path)) {
		out[f] = true
	}
	return out
}

func readSmall(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}
