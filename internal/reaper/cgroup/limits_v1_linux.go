//go:build linux

package cgroup

// cgroup v1 limits: on a hybrid host (a cgroup2 mount whose
// cgroup.controllers lacks memory, pids or cpu because those controllers
// are bound to cgroup v1 hierarchies) the limits of a provider are
// enforced in one v1 cgroup per needed controller, while containment
// (kill, proof, watchdog) stays on the provider's v2 cgroup. Layout,
// mirroring the v2 one (internal/reaper supervisor_linux.go, NewProvider):
//
//	<v1 mount>/<this process's cgroup in that hierarchy>/<v2 parent rel>/<v2 provider name>
//	e.g. /sys/fs/cgroup/memory/acpx-sidecar-123/provider-4
//
// nested below the sidecar's own v1 cgroup, so whatever limit the host put
// on the sidecar still covers its providers. The provider joins them
// itself, before it runs any code of its own (the launch entry,
// internal/launchexec; internal/reaper launch_linux.go). See docs/architecture.md, "Limits on cgroup v1".

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/procfs"
)

// V1Hierarchy is a cgroup v1 hierarchy holding one controller.
type V1Hierarchy struct {
	// Controller is the controller: "memory", "pids" or "cpu".
	Controller string
	// Mount is the hierarchy's mount point.
	Mount string
	// Own is this process's own cgroup directory in it (absolute).
	Own string
}

// v1Unlimited is what memory.limit_in_bytes reads when unlimited
// (PAGE_COUNTER_MAX pages); at or above it counts as "max".
const v1Unlimited = int64(0x7FFFFFFFFFFFF000)

// FindV1Hierarchy finds the writable cgroup v1 mount holding controller
// (mountinfo: fstype "cgroup", the controller among the super options)
// and this process's cgroup in it (/proc/self/cgroup). Errors say why
// there is none.
func FindV1Hierarchy(controller string) (V1Hierarchy, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return V1Hierarchy{}, err
	}
	own := ownV1Cgroup(controller)
	for _, line := range strings.Split(string(mi), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 || qf[0] != "cgroup" {
			continue
		}
		if !hasOption(qf[2], controller) {
			continue
		}
		root, mount := unescapeMount(pf[3]), unescapeMount(pf[4])
		dir := mount
		if own != "" {
			if rel, ok := strings.CutPrefix(own, root); ok && (root == "/" || rel == "" || rel[0] == '/') {
				dir = filepath.Join(mount, rel)
			}
		}
		if unix.Access(dir, unix.W_OK) != nil {
			return V1Hierarchy{}, fmt.Errorf("the cgroup v1 %s hierarchy at %s is not writable here (%s)", controller, mount, dir)
		}
		return V1Hierarchy{Controller: controller, Mount: mount, Own: dir}, nil
	}
	return V1Hierarchy{}, fmt.Errorf("no cgroup v1 hierarchy has the %s controller", controller)
}

// hasOption reports whether the comma-separated mount options opts
// contain o.
func hasOption(opts, o string) bool {
	for _, x := range strings.Split(opts, ",") {
		if x == o {
			return true
		}
	}
	return false
}

// ownV1Cgroup is this process's cgroup path in the v1 hierarchy holding
// controller ("N:ctl1,ctl2:/path" in /proc/self/cgroup); "" if not listed.
func ownV1Cgroup(controller string) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && parts[0] != "0" && hasOption(parts[1], controller) {
			return parts[2]
		}
	}
	return ""
}

// Plan says, per controller a Limits needs, where it is enforced:
// in the provider's v2 cgroup, or in a v1 hierarchy.
type Plan struct {
	// V2 are the controllers enforced in the v2 cgroup ("memory",
	// "pids", "cpu").
	V2 []string
	// V1 are the hierarchies of the controllers enforced in cgroup v1.
	V1 []V1Hierarchy
}

// PlanLimits decides where each controller of l is enforced: the v2
// hierarchy when its root offers it (cgroup.controllers), else a
// writable v1 hierarchy holding it. Errors (ErrLimitsUnsupported,
// wrapped): no cgroup2 mount, or a controller found in neither.
func PlanLimits(l Limits) (Plan, error) {
	var p Plan
	mount, err := Mount()
	if err != nil {
		return p, fmt.Errorf("%w: %v", ErrLimitsUnsupported, err)
	}
	offered := fields(filepath.Join(mount, "cgroup.controllers"))
	for _, c := range limitControllers(l) {
		if offered[c] {
			p.V2 = append(p.V2, c)
			continue
		}
		h, err := FindV1Hierarchy(c)
		if err != nil {
			return p, fmt.Errorf("%w: the cgroup2 hierarchy at %s offers no %s controller (cgroup.controllers: %q) and %v",
				ErrLimitsUnsupported, mount, c, strings.TrimSpace(readSmall(filepath.Join(mount, "cgroup.controllers"))), err)
		}
		p.V1 = append(p.V1, h)
	}
	return p, nil
}

// LimitsMechanism names where each kind of limit in l is enforced, for
// doctor (docs/operations.md, "Per-session limits"): "cgroup v2 memory",
// "cgroup v1 memory,pids,cpu", or both joined by "; "; "" when l sets
// none or they cannot be enforced (LimitsSupported says why).
func LimitsMechanism(l Limits) string {
	p, err := PlanLimits(l)
	if err != nil {
		return ""
	}
	var parts []string
	if len(p.V2) > 0 {
		parts = append(parts, "cgroup v2 "+strings.Join(p.V2, ","))
	}
	if len(p.V1) > 0 {
		var cs []string
		for _, h := range p.V1 {
			cs = append(cs, h.Controller)
		}
		parts = append(parts, "cgroup v1 "+strings.Join(cs, ","))
	}
	return strings.Join(parts, "; ")
}

// MakeV1Limits creates, for each v1 hierarchy of plan, the provider's v1
// cgroup named like its v2 cgroup v2dir in the parent directory
// <Own>/<parentRel> (parentRel: the v2 parent's path below the cgroup2
// mount, "acpx-sidecar-<pid>" by default; made if missing), and writes
// l's limits there (memory.limit_in_bytes and memory.memsw.limit_in_bytes
// where present; pids.max; cpu.cfs_period_us 100000 and cpu.cfs_quota_us
// percent×1000). It returns controller → directory, and every parent
// directory it used (also on error), for the caller to remove when it
// closes. On error, the provider cgroups it made are removed.
func MakeV1Limits(plan Plan, parentRel, v2dir string, l Limits) (dirs map[string]string, parents []string, err error) {
	if len(plan.V1) == 0 {
		return nil, nil, nil
	}
	dirs = map[string]string{}
	fail := func(err error) (map[string]string, []string, error) {
		RemoveV1Dirs(dirs)
		return nil, parents, err
	}
	for _, h := range plan.V1 {
		parent := filepath.Join(h.Own, parentRel)
		parents = append(parents, parent)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return fail(fmt.Errorf("reaper: create cgroup v1 %s parent: %w", h.Controller, err))
		}
		dir := filepath.Join(parent, filepath.Base(v2dir))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(fmt.Errorf("reaper: create cgroup v1 %s cgroup: %w", h.Controller, err))
		}
		dirs[h.Controller] = dir
		var writes [][2]string
		switch h.Controller {
		case "memory":
			v := strconv.FormatInt(l.MemoryBytes, 10)
			writes = append(writes, [2]string{"memory.limit_in_bytes", v})
			if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
				writes = append(writes, [2]string{"memory.memsw.limit_in_bytes", v})
			}
		case "pids":
			writes = append(writes, [2]string{"pids.max", strconv.FormatInt(l.Pids, 10)})
		case "cpu":
			writes = append(writes, [2]string{"cpu.cfs_period_us", "100000"},
				[2]string{"cpu.cfs_quota_us", strconv.FormatInt(l.CPUPercent*1000, 10)})
		}
		for _, w := range writes {
			if err := os.WriteFile(filepath.Join(dir, w[0]), []byte(w[1]), 0); err != nil {
				return fail(fmt.Errorf("reaper: write cgroup v1 %s: %w", w[0], err))
			}
		}
	}
	return dirs, parents, nil
}

// RemoveV1Dirs removes the v1 limit cgroups of one provider (rmdir only:
// one that still has a process is never removed). The first error is
// returned.
func RemoveV1Dirs(dirs map[string]string) error {
	var first error
	for _, d := range dirs {
		if err := RemoveSubtree(d); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// RemoveV1Mirrors removes, for a leftover provider cgroup v2dir of a dead
// sidecar (ledger recovery, Recover), the v1 limit cgroups named like it
// in every v1 hierarchy of a limit controller, if they exist and are
// empty. Best effort: the stale-parent sweep removes what remains.
func RemoveV1Mirrors(v2dir string) {
	mount, err := Mount()
	if err != nil {
		return
	}
	rel, err := filepath.Rel(mount, v2dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return
	}
	for _, c := range []string{"memory", "pids", "cpu"} {
		if h, err := FindV1Hierarchy(c); err == nil {
			_ = RemoveSubtree(filepath.Join(h.Own, rel))
		}
	}
}

// SweepStaleV1Parents is reaper's sweep of stale cgroup parents for the
// v1 limit hierarchies:
// below this process's own cgroup of each, an "acpx-sidecar-<pid>"
// directory of a sidecar that is gone is removed with everything below it
// when empty (rmdir only: a cgroup with a process is left for the ledger's
// recovery and a later sweep).
func SweepStaleV1Parents(log *zap.Logger) {
	for _, c := range []string{"memory", "pids", "cpu"} {
		h, err := FindV1Hierarchy(c)
		if err != nil {
			continue
		}
		for _, p := range OtherSidecarParents(h.Own) {
			if _, alive := procfs.ReadStat(p.Pid); alive {
				continue
			}
			if err := RemoveSubtree(p.Dir); err == nil {
				log.Info("removed a stale cgroup v1 parent", zap.String("dir", p.Dir))
			}
		}
	}
}

// readV1Resources fills r's memory and pids members from the tree's v1
// limit cgroups (those the tree has): memory.usage_in_bytes,
// memory.limit_in_bytes (-1 when unlimited), oom_kill of
// memory.oom_control; pids.current, pids.max, max of pids.events.
func readV1Resources(r *Resources, dirs map[string]string) {
	if d, ok := dirs["memory"]; ok {
		r.MemoryCurrent = readNum(filepath.Join(d, "memory.usage_in_bytes"))
		if m := readNum(filepath.Join(d, "memory.limit_in_bytes")); m != nil && *m >= v1Unlimited {
			v := int64(-1)
			r.MemoryMax = &v
		} else {
			r.MemoryMax = m
		}
		r.OomKills = eventCount(filepath.Join(d, "memory.oom_control"), "oom_kill")
	}
	if d, ok := dirs["pids"]; ok {
		r.PidsCurrent = readNum(filepath.Join(d, "pids.current"))
		r.PidsMax = readNum(filepath.Join(d, "pids.max"))
		r.PidsLimitHits = eventCount(filepath.Join(d, "pids.events"), "max")
	}
}
