//go:build linux

package reaper

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctest"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// TestStart_LimitsOutsideCgroupModeLaunchNothing: a Spec with limits in a
// mode without a cgroup fails ErrLimitsUnsupported and starts nothing
// (docs/protocol.md §18.2: PLATFORM_UNSUPPORTED, nothing launched).
func TestStart_LimitsOutsideCgroupModeLaunchNothing(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeSubreaper, mark)
	_, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", "exec sleep 1000"}, Env: env, Limits: Limits{Pids: 16}})
	if !errors.Is(err, ErrLimitsUnsupported) {
		t.Fatalf("Start with limits in subreaper mode: %v, want ErrLimitsUnsupported", err)
	}
	proctest.RequireNoneAlive(t, mark)
}

// limitFile is the file that holds controller c's limit for tr: in its
// cgroup v1 limit dir when the limit is enforced there, else in its v2
// cgroup (v2name).
func limitFile(tr *Tree, c, v2name, v1name string) string {
	if d, ok := tr.cg.v1[c]; ok {
		return filepath.Join(d, v1name)
	}
	return filepath.Join(tr.CgroupPath(), v2name)
}

// TestStart_LimitsInCgroupMode: where a controller is available (the
// cgroup2 root offers it, or, on a hybrid host, a cgroup v1 hierarchy
// holds it) its limit is in force before the provider runs: memory.max /
// memory.limit_in_bytes (and memory.memsw.limit_in_bytes), pids.max,
// cpu.max / cpu.cfs_quota_us; the provider itself is a member of each v1
// limit cgroup, Resources reads the limits back, and the proof removes the
// v1 dirs with the v2 cgroup. Where neither hierarchy has a controller
// (LimitsSupported false), Start fails ErrLimitsUnsupported, starts
// nothing and leaves no cgroup.
func TestStart_LimitsInCgroupMode(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeCgroup, mark)
	l := Limits{MemoryBytes: 64 << 20, Pids: 16, CPUPercent: 50}
	if ok, why := cgroup.LimitsSupported(l); !ok {
		_, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", "exec sleep 1000"}, Env: env, Name: "lim", Limits: l})
		if !errors.Is(err, ErrLimitsUnsupported) || !strings.Contains(err.Error(), "controller") {
			t.Fatalf("Start with unenforceable limits (%s): %v, want ErrLimitsUnsupported naming the controller", why, err)
		}
		proctest.RequireNoneAlive(t, mark)
		left, _ := filepath.Glob(filepath.Join(s.cgParent, "lim-*"))
		if len(left) != 0 {
			t.Fatalf("cgroups left behind: %v", left)
		}
		t.Logf("limits not enforceable here (%s): refused, nothing started", why)
		return
	}
	t.Logf("mechanism: %s", cgroup.LimitsMechanism(l))
	// The provider's first output is its own cgroup membership, read by
	// shell builtins in the provider process itself.
	tr, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", `while read -r l; do echo "$l"; done </proc/$$/cgroup; echo up; exec sleep 1000`},
		Env: env, Name: "lim", Limits: l})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { tr.Stdin().Close(); tr.Stdout().Close(); tr.Stderr().Close() })
	cgLines := readUntil(t, tr, "up")
	memFile := limitFile(tr, "memory", "memory.max", "memory.limit_in_bytes")
	for file, want := range map[string]string{
		memFile: "67108864",
		limitFile(tr, "pids", "pids.max", "pids.max"):       "16",
		limitFile(tr, "cpu", "cpu.max", "cpu.cfs_quota_us"): map[bool]string{true: "50000", false: "50000 100000"}[tr.cg.v1["cpu"] != ""],
	} {
		b, err := os.ReadFile(file)
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q (%v), want %q", file, b, err, want)
		}
	}
	if d, ok := tr.cg.v1["memory"]; ok {
		if _, err := os.Stat(filepath.Join(d, "memory.memsw.limit_in_bytes")); err == nil {
			if b, _ := os.ReadFile(filepath.Join(d, "memory.memsw.limit_in_bytes")); strings.TrimSpace(string(b)) != "67108864" {
				t.Errorf("memory.memsw.limit_in_bytes = %q, want the memory limit (no evasion into swap)", b)
			}
		}
	}
	for c, d := range tr.cg.v1 {
		if procs := cgroup.Procs(d); len(procs) != 1 || procs[0] != tr.Pid() {
			t.Errorf("v1 %s cgroup %s has %v, want the provider %d", c, d, procs, tr.Pid())
		}
		h, _ := cgroup.FindV1Hierarchy(c)
		rel := "/" + cgroup.Rel(h.Mount, d)
		found := false
		for _, line := range cgLines {
			parts := strings.SplitN(line, ":", 3)
			found = found || len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), c) && parts[2] == rel
		}
		if !found {
			t.Errorf("the provider's own first view of /proc/self/cgroup %q lacks %s:%s", cgLines, c, rel)
		}
	}
	r, err := tr.Resources()
	if err != nil || r.MemoryMax == nil || *r.MemoryMax != 64<<20 || r.PidsMax == nil || *r.PidsMax != 16 ||
		r.PidsCurrent == nil || *r.PidsCurrent < 1 || r.MemoryCurrent == nil || *r.MemoryCurrent <= 0 {
		t.Errorf("Resources = %+v, %v", r, err)
	}
	v1 := tr.cg.v1
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	requireComplete(t, tr.Terminate(ctx, 200*time.Millisecond, time.Second), ModeCgroup)
	proctest.RequireNoneAlive(t, mark)
	for c, d := range v1 {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("v1 %s cgroup %s still there after the proof (%v)", c, d, err)
		}
	}
}

// readUntil reads stdout lines of tr (one scanner) up to want, and
// returns those before it.
func readUntil(t *testing.T, tr *Tree, want string) []string {
	t.Helper()
	ch := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(tr.Stdout())
		var lines []string
		for sc.Scan() {
			if sc.Text() == want {
				ch <- lines
				return
			}
			lines = append(lines, sc.Text())
		}
		ch <- append(lines, "<EOF>")
	}()
	select {
	case lines := <-ch:
		if len(lines) > 0 && lines[len(lines)-1] == "<EOF>" {
			t.Fatalf("stdout ended after %q without %q", lines, want)
		}
		return lines
	case <-time.After(10 * time.Second):
		tr.Stdout().Close()
		<-ch
		t.Fatalf("no %q line on stdout within deadline", want)
	}
	return nil
}
