//go:build linux

package reaper

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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

// TestStart_LimitsOutsideCgroupModeLaunchNothing: a Spec with limits in a
// mode without a cgroup fails ErrLimitsUnsupported and starts nothing
// (docs/protocol.md §18.2: PLATFORM_UNSUPPORTED, nothing launched).
func TestStart_LimitsOutsideCgroupModeLaunchNothing(t *testing.T) {
	mark, env := newMark(t)
	s := newSup(t, ModeSubreaper, mark)
	_, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", "exec sleep 1000"}, Env: env, Limits: Limits{Pids: 16}})
	if !errors.Is(err, ErrLimitsUnsupported) {
		t.Fatalf("Start with limits in subreaper mode: %v, want ErrLimitsUnsupported", err)
	}
	requireNoneAlive(t, mark)
}

// TestStart_LimitsInCgroupMode: where the cgroup2 hierarchy offers the
// controllers, memory.max, memory.swap.max, pids.max and cpu.max of the
// provider cgroup hold the limits before the provider runs, and Resources
// reads them back; where it does not (LimitsSupported false, e.g. a
// hybrid hierarchy whose memory/pids/cpu are bound to cgroup v1), Start
// fails ErrLimitsUnsupported, starts nothing and leaves no cgroup.
func TestStart_LimitsInCgroupMode(t *testing.T) {
	mark, env := newMark(t)
	s := newSup(t, ModeCgroup, mark)
	l := Limits{MemoryBytes: 64 << 20, Pids: 16, CPUPercent: 50}
	if ok, why := LimitsSupported(l); !ok {
		_, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", "exec sleep 1000"}, Env: env, Name: "lim", Limits: l})
		if !errors.Is(err, ErrLimitsUnsupported) || !strings.Contains(err.Error(), "controller") {
			t.Fatalf("Start with unenforceable limits (%s): %v, want ErrLimitsUnsupported naming the controller", why, err)
		}
		requireNoneAlive(t, mark)
		left, _ := filepath.Glob(filepath.Join(s.cgParent, "lim-*"))
		if len(left) != 0 {
			t.Fatalf("cgroups left behind: %v", left)
		}
		t.Logf("limits not enforceable here (%s): refused, nothing started", why)
		return
	}
	tr, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", "echo up; exec sleep 1000"}, Env: env, Name: "lim", Limits: l})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { tr.Stdin().Close(); tr.Stdout().Close(); tr.Stderr().Close() })
	readLines(t, tr, 1)
	for file, want := range map[string]string{"memory.max": "67108864", "pids.max": "16", "cpu.max": "50000 100000"} {
		b, err := os.ReadFile(filepath.Join(tr.CgroupPath(), file))
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q (%v), want %q", file, b, err, want)
		}
	}
	r, err := tr.Resources()
	if err != nil || r.MemoryMax == nil || *r.MemoryMax != 64<<20 || r.PidsMax == nil || *r.PidsMax != 16 || r.PidsCurrent == nil || *r.PidsCurrent < 1 {
		t.Errorf("Resources = %+v, %v", r, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	requireComplete(t, tr.Terminate(ctx, 200*time.Millisecond, time.Second), ModeCgroup)
	requireNoneAlive(t, mark)
}
