//go:build linux

package reaper

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctest"
)

const (
	termGrace = 200 * time.Millisecond
	killGrace = 2 * time.Second // generous: a bound, not a timed assertion
)

var allModes = []Mode{ModeCgroup, ModeProcessGroup, ModeSubreaper}

// newSup makes a Supervisor and registers, LIFO, its Close and a safety net
// that kills (via pidfd) anything a failed test left with its marker.
func newSup(t *testing.T, mode Mode, mark string) *Supervisor {
	t.Helper()
	s, err := newSupervisor(Options{Mode: mode})
	if err != nil {
		t.Skipf("mode %s unavailable: %v", mode, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	proctest.KillAliveOnCleanup(t, mark)
	return s
}

func startSh(t *testing.T, s *Supervisor, env []string, script string) *Tree {
	t.Helper()
	tr, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", script}, Env: env, Dir: "/", Name: "test"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		tr.Stdin().Close()
		tr.Stdout().Close()
		tr.Stderr().Close()
	})
	return tr
}

func waitExited(t *testing.T, tr *Tree) {
	t.Helper()
	select {
	case <-tr.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("leader not reaped within deadline")
	}
}

func findProc(term Termination, pid int) (ProcessRecord, bool) {
	for _, p := range term.Processes {
		if p.Pid == pid {
			return p, true
		}
	}
	return ProcessRecord{}, false
}

func requireComplete(t *testing.T, term Termination, mode Mode) {
	t.Helper()
	if !term.Complete || !term.Verified.TreeEmpty {
		t.Fatalf("termination not complete: %+v", term)
	}
	if term.Containment != mode {
		t.Fatalf("containment %q, want %q", term.Containment, mode)
	}
	want := methodGuardian
	if mode == ModeCgroup {
		want = methodCgroup
	}
	if term.Verified.Method != want {
		t.Fatalf("verified method %q, want %q", term.Verified.Method, want)
	}
}

func sigNames(term Termination) []string {
	var out []string
	for _, s := range term.Signals {
		out = append(out, s.Signal)
	}
	return out
}

// TestDetect_ListsModesStrongestFirst: doctor lines in the order of
// docs/protocol.md §2 (cgroup, then subreaper, then process-group).
func TestDetect_ListsModesStrongestFirst(t *testing.T) {
	ms := Detect()
	if len(ms) != 3 || ms[0].Mode != ModeCgroup || ms[1].Mode != ModeSubreaper || ms[2].Mode != ModeProcessGroup {
		t.Fatalf("Detect = %+v", ms)
	}
	for _, m := range ms {
		if m.Reason == "" {
			t.Errorf("%s has no reason", m.Mode)
		}
	}
	if !ms[2].Available {
		t.Fatalf("process-group unavailable: %s", ms[2].Reason)
	}
}

// TestStart_LeaderExitClosesExitedWithCode: a provider that exits on its
// own is reaped by the central reaper and its code reported.
func TestStart_LeaderExitClosesExitedWithCode(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			mark, env := proctest.NewMark(t)
			s := newSup(t, mode, mark)
			tr := startSh(t, s, env, "echo hi; exit 7")
			if got := proctest.ReadLines(t, tr, 1); got[0] != "hi" {
				t.Fatalf("stdout %q", got)
			}
			waitExited(t, tr)
			st := tr.ExitStatus()
			if st.Code == nil || *st.Code != 7 || st.Signal != "" {
				t.Fatalf("exit status %+v", st)
			}
			term := tr.Terminate(context.Background(), termGrace, killGrace)
			requireComplete(t, term, mode)
			if len(term.Signals) != 0 {
				t.Fatalf("signals sent to an empty tree: %+v", term.Signals)
			}
			p, ok := findProc(term, tr.Pid())
			if !ok || p.Role != RoleProvider || p.ExitCode == nil || *p.ExitCode != 7 {
				t.Fatalf("provider record %+v in %+v", p, term.Processes)
			}
			if mode == ModeCgroup {
				if _, err := os.Stat(tr.CgroupPath()); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("cgroup %s not removed: %v", tr.CgroupPath(), err)
				}
			}
			proctest.RequireNoneAlive(t, mark)
		})
	}
}

// TestTerminate_IgnoredTermGetsKilled: a provider ignoring SIGTERM is
// killed and the proof says SIGKILL (docs/protocol.md §12).
func TestTerminate_IgnoredTermGetsKilled(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			mark, env := proctest.NewMark(t)
			s := newSup(t, mode, mark)
			tr := startSh(t, s, env, `trap "" TERM; echo ready; exec sleep 1000`)
			proctest.ReadLines(t, tr, 1)
			term := tr.Terminate(context.Background(), termGrace, killGrace)
			requireComplete(t, term, mode)
			if got := strings.Join(sigNames(term), ","); got != "SIGTERM,SIGKILL" {
				t.Fatalf("signals %s", got)
			}
			p, ok := findProc(term, tr.Pid())
			if !ok || p.Signal != "SIGKILL" || p.ExitCode != nil || p.Role != RoleProvider {
				t.Fatalf("provider record %+v", p)
			}
			if st := tr.ExitStatus(); st.Signal != "SIGKILL" {
				t.Fatalf("exit status %+v", st)
			}
			if len(term.Errors) != 0 {
				t.Fatalf("errors %+v", term.Errors)
			}
			proctest.RequireNoneAlive(t, mark)
		})
	}
}

// TestTerminate_SetsidGrandchildKilledAndListed: a descendant that left the
// process group (setsid, as Codex tool commands do; docs/agents.md, Codex) and
// ignores SIGTERM is killed and listed as a descendant.
func TestTerminate_SetsidGrandchildKilledAndListed(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			mark, env := proctest.NewMark(t)
			s := newSup(t, mode, mark)
			tr := startSh(t, s, env, `setsid sh -c 'trap "" TERM; echo $$; exec sleep 1000' & echo leader; wait`)
			lines := proctest.ReadLines(t, tr, 2)
			gc := 0
			for _, l := range lines {
				if n, err := strconv.Atoi(l); err == nil {
					gc = n
				}
			}
			if gc == 0 {
				t.Fatalf("no grandchild pid in %q", lines)
			}
			if p, ok := readStat(gc); !ok || p.sid != gc {
				t.Fatalf("grandchild %d not in its own session: %+v", gc, p)
			}
			term := tr.Terminate(context.Background(), termGrace, killGrace)
			requireComplete(t, term, mode)
			p, ok := findProc(term, gc)
			if !ok || p.Role != RoleDescendant || p.Signal != "SIGKILL" {
				t.Fatalf("grandchild record %+v in %+v", p, term.Processes)
			}
			if lp, ok := findProc(term, tr.Pid()); !ok || lp.Signal != "SIGTERM" {
				t.Fatalf("provider record %+v", lp)
			}
			proctest.RequireNoneAlive(t, mark)
		})
	}
}

// TestTerminate_DeadLeaderStillKillsLingeringDescendants: the provider
// exited on its own; its orphaned descendants are still ended and proven
// gone (docs/rules.md#r22: no group signal after the leader is reaped).
func TestTerminate_DeadLeaderStillKillsLingeringDescendants(t *testing.T) {
	cases := []struct {
		mode   Mode
		script string
	}{
		// setsid: not in the group; found via the cgroup.
		{ModeCgroup, `setsid sh -c 'trap "" TERM; echo $$; exec sleep 1000' & sleep 0.1; exit 3`},
		// same group, orphaned; found via pgid / adoption.
		{ModeProcessGroup, `sh -c 'trap "" TERM; echo $$; exec sleep 1000' & sleep 0.1; exit 3`},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			mark, env := proctest.NewMark(t)
			s := newSup(t, tc.mode, mark)
			tr := startSh(t, s, env, tc.script)
			gc, err := strconv.Atoi(proctest.ReadLines(t, tr, 1)[0])
			if err != nil {
				t.Fatal(err)
			}
			waitExited(t, tr)
			if st := tr.ExitStatus(); st.Code == nil || *st.Code != 3 {
				t.Fatalf("exit status %+v", st)
			}
			if len(proctest.Alive(mark)) == 0 {
				t.Fatal("descendant did not linger; test proves nothing")
			}
			term := tr.Terminate(context.Background(), termGrace, killGrace)
			requireComplete(t, term, tc.mode)
			p, ok := findProc(term, gc)
			if !ok || p.Role != RoleDescendant || p.Signal != "SIGKILL" {
				t.Fatalf("descendant record %+v in %+v", p, term.Processes)
			}
			proctest.RequireNoneAlive(t, mark)
		})
	}
}

// TestTerminate_TwiceReturnsComplete: a proven tree stays proven; no new
// signal is sent.
func TestTerminate_TwiceReturnsComplete(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			mark, env := proctest.NewMark(t)
			s := newSup(t, mode, mark)
			tr := startSh(t, s, env, `echo ready; exec sleep 1000`)
			proctest.ReadLines(t, tr, 1)
			first := tr.Terminate(context.Background(), termGrace, killGrace)
			requireComplete(t, first, mode)
			second := tr.Terminate(context.Background(), termGrace, killGrace)
			requireComplete(t, second, mode)
			if len(second.Signals) != len(first.Signals) || len(second.Processes) != len(first.Processes) {
				t.Fatalf("second result differs: %+v vs %+v", second, first)
			}
			proctest.RequireNoneAlive(t, mark)
		})
	}
}

// TestTerminate_ConcurrentCallsSerialize: concurrent Terminates both see
// the complete proof.
func TestTerminate_ConcurrentCallsSerialize(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, "", mark)
	tr := startSh(t, s, env, `trap "" TERM; echo ready; sleep 1000 & wait`)
	proctest.ReadLines(t, tr, 1)
	var wg sync.WaitGroup
	res := make([]Termination, 3)
	for i := range res {
		wg.Go(func() { res[i] = tr.Terminate(context.Background(), termGrace, killGrace) })
	}
	wg.Wait()
	for _, r := range res {
		requireComplete(t, r, s.Mode())
		if n := strings.Count(strings.Join(sigNames(r), ","), "SIGKILL"); n != 1 {
			t.Fatalf("signals %v", sigNames(r))
		}
	}
	proctest.RequireNoneAlive(t, mark)
}

// TestTerminate_CancelledContextEscalatesToKill: a done ctx skips the TERM
// grace, and the result is still verified.
func TestTerminate_CancelledContextEscalatesToKill(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, "", mark)
	tr := startSh(t, s, env, `trap "" TERM; echo ready; exec sleep 1000`)
	proctest.ReadLines(t, tr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	term := tr.Terminate(ctx, time.Hour, killGrace)
	requireComplete(t, term, s.Mode())
	proctest.RequireNoneAlive(t, mark)
}

// TestSeal_BlocksStart: after Seal nothing is launched (docs/rules.md#r21).
func TestSeal_BlocksStart(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, "", mark)
	s.Seal()
	_, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", "exec sleep 1000"}, Env: env})
	if !errors.Is(err, ErrSealed) {
		t.Fatalf("Start after Seal: %v", err)
	}
	proctest.RequireNoneAlive(t, mark)
}

// TestStart_ExecFileIsExecutedNotPath: the opened verified file runs, Path
// is only argv[0] (docs/rules.md#r4); for a binary and for a "#!" script.
func TestStart_ExecFileIsExecutedNotPath(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, "", mark)
	sh, err := filepath.EvalSymlinks("/bin/sh") // O_NOFOLLOW: the real file
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "prov.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho script \"$0\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file, flagName string
		flags          int
		args           []string
		want           string
	}{
		{sh, "O_RDONLY", os.O_RDONLY, []string{"-c", "echo binary"}, "binary"},
		{sh, "O_PATH", unix.O_PATH, []string{"-c", "echo binary"}, "binary"},
		{script, "O_RDONLY", os.O_RDONLY, nil, "script "},
	} {
		t.Run(filepath.Base(c.file)+"-"+c.flagName, func(t *testing.T) {
			f, err := os.OpenFile(c.file, c.flags|unix.O_NOFOLLOW, 0)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer f.Close()
			tr, err := s.Start(Spec{Path: "/nonexistent/provider", Args: c.args, Env: env, ExecFile: f})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			defer func() { tr.Stdin().Close(); tr.Stdout().Close(); tr.Stderr().Close() }()
			if got := proctest.ReadLines(t, tr, 1)[0]; !strings.HasPrefix(got, c.want) {
				t.Fatalf("stdout %q, want prefix %q", got, c.want)
			}
			waitExited(t, tr)
			requireComplete(t, tr.Terminate(context.Background(), termGrace, killGrace), s.Mode())
			proctest.RequireNoneAlive(t, mark)
		})
	}
}

// TestStart_CgroupHoldsProviderFromFirstInstruction: the provider is in its
// own cgroup when it runs (UseCgroupFD; no window outside it).
func TestStart_CgroupHoldsProviderFromFirstInstruction(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeCgroup, mark)
	tr := startSh(t, s, env, `cat /proc/self/cgroup | grep '^0::'; exec sleep 1000`)
	line := proctest.ReadLines(t, tr, 1)[0]
	rel := strings.TrimPrefix(line, "0::")
	if !strings.HasSuffix(tr.CgroupPath(), rel) || !strings.Contains(rel, "/test-") {
		t.Fatalf("provider cgroup %q, tree cgroup %q", rel, tr.CgroupPath())
	}
	requireComplete(t, tr.Terminate(context.Background(), termGrace, killGrace), ModeCgroup)
	proctest.RequireNoneAlive(t, mark)
}
