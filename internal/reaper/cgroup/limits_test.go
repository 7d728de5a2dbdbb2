//go:build linux

package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"go.uber.org/zap"
)

// needV1 skips unless controller c's limits are enforced in a cgroup v1
// hierarchy here (a hybrid host), and returns that hierarchy.
func needV1(t *testing.T, c string) V1Hierarchy {
	t.Helper()
	p, err := PlanLimits(Limits{MemoryBytes: 1 << 30, Pids: 64, CPUPercent: 100})
	if err != nil {
		t.Skipf("limits not enforceable here: %v", err)
	}
	for _, h := range p.V1 {
		if h.Controller == c {
			return h
		}
	}
	t.Skipf("the %s limit is not enforced in cgroup v1 here", c)
	return V1Hierarchy{}
}

// TestParseEventCount reads the flat-keyed memory.events / pids.events
// format (docs/protocol.md §18.2 resources).
func TestParseEventCount(t *testing.T) {
	text := "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n"
	for key, want := range map[string]int64{"oom_kill": 2, "max": 12, "oom": 3, "absent": 0} {
		if got := parseEventCount(text, key); got != want {
			t.Errorf("%s = %d, want %d", key, got, want)
		}
	}
}

// TestSweepStaleV1Parents: an empty v1 parent of a dead sidecar (with an
// empty provider cgroup in it) is removed; one of a live process is not.
func TestSweepStaleV1Parents(t *testing.T) {
	h := needV1(t, "pids")
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(h.Own, "acpx-sidecar-"+strconv.Itoa(cmd.Process.Pid))
	live := filepath.Join(h.Own, "acpx-sidecar-1")
	for _, d := range []string{filepath.Join(dead, "provider-1"), live} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { RemoveSubtree(dead); RemoveSubtree(live) })
	SweepStaleV1Parents(zap.NewNop())
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale parent %s not removed (%v)", dead, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the parent of a live pid was removed: %v", err)
	}
}

// TestRemoveV1Mirrors: ledger recovery's removal of a leftover provider's
// v1 limit cgroups, found by the v2 cgroup's path.
func TestRemoveV1Mirrors(t *testing.T) {
	h := needV1(t, "pids")
	mount, err := Mount()
	if err != nil {
		t.Fatal(err)
	}
	rel := filepath.Join("acpx-test-mirror-"+strconv.Itoa(os.Getpid()), "prov-7")
	d := filepath.Join(h.Own, rel)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveSubtree(filepath.Dir(d)) })
	RemoveV1Mirrors(filepath.Join(mount, rel))
	if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("v1 mirror %s not removed (%v)", d, err)
	}
}
