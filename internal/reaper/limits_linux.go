//go:build linux

package reaper

import (
	"errors"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// The Supervisor's and Tree's part of cgroup v1 limits (the mechanism is
// internal/reaper/cgroup, limits_v1_linux.go): a Supervisor remembers the
// parent directories it made in v1 hierarchies and removes them at Close;
// a Tree keeps its v1 limit cgroups (Tree.cg.v1) and removes them once
// it is proven empty.

// makeV1Limits is cgroup.MakeV1Limits below this Supervisor's v1 parents
// (<own v1 cgroup>/<cgParent below the cgroup2 mount>), which it
// remembers (s.v1Parents) so Close removes them. s.mu held.
func (s *Supervisor) makeV1Limits(plan cgroup.Plan, v2dir string, l Limits) (map[string]string, error) {
	dirs, parents, err := cgroup.MakeV1Limits(plan, cgroup.Rel(s.cgMount, s.cgParent), v2dir, l)
	if len(parents) > 0 && s.v1Parents == nil {
		s.v1Parents = map[string]bool{}
	}
	for _, p := range parents {
		s.v1Parents[p] = true
	}
	return dirs, err
}

// removeV1Parents removes this Supervisor's v1 parent directories if
// empty (Close).
func (s *Supervisor) removeV1Parents() {
	s.mu.Lock()
	parents := s.v1Parents
	s.mu.Unlock()
	for p := range parents {
		if err := unix.Rmdir(p); err != nil && !errors.Is(err, unix.ENOENT) {
			s.log.Info("reaper: cgroup v1 parent not removed", zap.String("cgroup", p), zap.Error(err))
		}
	}
}

// removeLimitCgroups removes the tree's v1 limit cgroups once the tree is
// proven empty (finalize), retrying briefly: the kernel lets the last
// task go asynchronously. Errors name the directory.
func (t *Tree) removeLimitCgroups() error {
	if len(t.cg.v1) == 0 {
		return nil
	}
	var err error
	for i := 0; i < 50; i++ {
		if err = cgroup.RemoveV1Dirs(t.cg.v1); err == nil {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return err
}

// Resources reads the tree's cgroup counters (docs/protocol.md §18.2;
// cgroup.ReadResources): from its v2 cgroup, and for a controller whose
// limit is in a cgroup v1 hierarchy, from that v1 cgroup. Errors: no
// cgroup (not cgroup mode), or the cgroup is gone.
func (t *Tree) Resources() (Resources, error) {
	return cgroup.ReadResources(t.CgroupPath(), t.cg.v1)
}
