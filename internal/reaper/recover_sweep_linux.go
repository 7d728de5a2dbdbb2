//go:build linux

package reaper

import (
	"os"
	"path/filepath"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// SweptCgroup is one populated cgroup of a dead sidecar that
// SweepDeadParents killed: its directory, the processes that were in it,
// and whether it was observed empty and removed.
type SweptCgroup struct {
	// Dir is the cgroup's directory (absolute).
	Dir string
	// Pids are the live members of its subtree before the kill.
	Pids []int
	// Removed is true when the cgroup was seen empty within the grace and
	// removed.
	Removed bool
}

// SweepDeadParents ends what is left in the cgroups of dead sidecars,
// ledger entry or not (docs/operations.md, "The ownership ledger"): below
// the cgroup2 mount, every default parent <mount>/acpx-sidecar-<pid> whose
// pid is gone (or a zombie) is walked; each populated provider cgroup in
// it is killed with cgroup.kill, waited for (at most grace in all) and
// removed, and so is the parent once empty. A tree whose agent deleted its
// own ledger entry and killed both the sidecar and its watchdog is found
// this way. A parent whose pid is alive again (recycled) is left for a
// later sweep. It reports every cgroup it killed.
func SweepDeadParents(grace time.Duration) []SweptCgroup {
	mount, err := cgroup.Mount()
	if err != nil {
		return nil
	}
	parents := cgroup.OtherSidecarParents(mount)
	if parents == nil {
		return nil
	}
	deadline := time.Now().Add(grace)
	var out []SweptCgroup
	for _, p := range parents {
		if info, alive := readStat(p.Pid); alive && info.state != 'Z' {
			continue
		}
		parent := p.Dir
		children, _ := os.ReadDir(parent)
		for _, c := range children {
			dir := filepath.Join(parent, c.Name())
			if !c.IsDir() {
				continue
			}
			if pop, err := cgroup.Populated(dir); err != nil || !pop {
				continue
			}
			sc := SweptCgroup{Dir: dir, Pids: cgroup.TreeProcs(dir)}
			_ = cgroup.WriteKill(dir)
			if cgroup.WaitEmpty(nil, nil, nil, dir, time.Until(deadline), nil) {
				sc.Removed = cgroup.RemoveSubtree(dir) == nil
				cgroup.RemoveV1Mirrors(dir)
			}
			out = append(out, sc)
		}
		if pop, err := cgroup.Populated(parent); err == nil && !pop {
			_ = cgroup.RemoveSubtree(parent) // empty cgroups only, deepest first
		}
	}
	return out
}
