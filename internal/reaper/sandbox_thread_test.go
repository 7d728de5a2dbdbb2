//go:build linux

package reaper

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/launchexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/proctest"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// ownTreePlan is a workspace plan with every layer against root
// (processes own-tree, capabilities none, seccomp), cwd work; the test
// is skipped where the machine cannot enforce it.
func ownTreePlan(t *testing.T, work string) *sandbox.Plan {
	t.Helper()
	c := sandbox.Probe()
	pol := sandbox.Policy{Filesystem: sandbox.Workspace, Network: sandbox.NetAll, Signals: sandbox.OwnTree,
		Processes: sandbox.OwnTreeProcesses, Capabilities: sandbox.CapsNone}
	plan, _, err := sandbox.Build(pol, sandbox.Paths{Cwd: work}, sandbox.BuildOptions{BindReadOnly: c.Namespaces})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(&plan); err != nil {
		t.Skip(err)
	}
	return &plan
}

// TestSandboxed_OwnTreeIsProvenByHostPids: a tree in its own PID
// namespace (its init, the agent, a setsid'd grandchild that ignores
// SIGTERM and a double-forked orphan) sees only itself, while the
// Supervisor sees every process by its host pid: the termination is
// complete, lists each of them (the provider with the signal that ended
// it, the init as a descendant), and nothing survives; cgroup and
// subreaper containment alike.
func TestSandboxed_OwnTreeIsProvenByHostPids(t *testing.T) {
	for _, mode := range []Mode{ModeCgroup, ModeSubreaper} {
		t.Run(string(mode), func(t *testing.T) {
			mark, env := proctest.NewMark(t)
			s := newSup(t, mode, mark)
			work := t.TempDir()
			plan := ownTreePlan(t, work)
			script := `setsid sh -c 'trap "" TERM; exec sleep 1000' & (sh -c 'sleep 1000 &' &); sleep 0.1; ls /proc | grep -cE '^[0-9]+$'; echo self=$$; wait`
			tr, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", script}, Env: env, Dir: work, Name: "test", Sandbox: plan})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			t.Cleanup(func() { tr.Stdin().Close(); tr.Stdout().Close(); tr.Stderr().Close() })
			lines := proctest.ReadLines(t, tr, 2)
			if n, _ := strconv.Atoi(lines[0]); n < 5 || n > 8 {
				t.Errorf("the tree's /proc lists %s processes, want its own few (init, sh, 2 sleeps, setsid sh, ls, grep)", lines[0])
			}
			if lines[1] != "self=2" {
				t.Errorf("the agent's own pid %q, want 2 (pid 1 is the namespace's init)", lines[1])
			}
			// The settled tree: the init, the provider and the two sleeps
			// (the double fork's middle process exits at once).
			var alive []int
			argv := map[int]string{}
			deadline := time.Now().Add(10 * time.Second)
			for {
				alive, argv = alive[:0], map[int]string{}
				sleeps, inits := 0, 0
				for _, pid := range proctest.Alive(mark) {
					a := cmdline(pid)
					switch {
					case strings.Contains(a, GuardianArg):
						continue // the subreaper guardian: not the tree
					case a == "sleep 1000 ":
						sleeps++
					case a == sandbox.InitName+" ":
						inits++
					case pid != tr.Pid():
						continue // a process between two states
					}
					alive, argv[pid] = append(alive, pid), a
				}
				if sleeps == 2 && inits == 1 && slices.Contains(alive, tr.Pid()) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the tree never settled: %v", argv)
				}
				time.Sleep(10 * time.Millisecond) // the orphans are forked asynchronously; bounded
			}
			term := tr.Terminate(context.Background(), termGrace, killGrace)
			requireComplete(t, term, mode)
			for _, pid := range alive {
				p, ok := findProc(term, pid)
				if !ok {
					t.Errorf("host pid %d (%q) is not in the proof %+v", pid, argv[pid], term.Processes)
				}
				if argv[pid] == sandbox.InitName+" " && p.Role != RoleDescendant {
					t.Errorf("init record %+v, want a descendant", p)
				}
			}
			if p, ok := findProc(term, tr.Pid()); !ok || p.Role != RoleProvider || p.Signal != "SIGTERM" {
				t.Errorf("provider record %+v", p)
			}
			for _, p := range term.Processes {
				if p.ExitCode == nil && p.Signal == "" && p.ReapedBy == "" {
					t.Errorf("record %+v says nothing of how it ended", p)
				}
			}
			proctest.RequireNoneAlive(t, mark)
		})
	}
}

// cmdline is a live process's argv, joined by spaces.
func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// TestSandboxed_ExitedTreeLeavesNoInitBehind: a sandboxed provider that
// exits on its own with code 3 is reported with that code (it is this
// process's own child, not the init's), and its tree's cgroup empties
// without any signal: the init leaves once the provider is reaped.
func TestSandboxed_ExitedTreeLeavesNoInitBehind(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeCgroup, mark)
	work := t.TempDir()
	tr, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", "exit 3"}, Env: env, Dir: work, Name: "test", Sandbox: ownTreePlan(t, work)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { tr.Stdin().Close(); tr.Stdout().Close(); tr.Stderr().Close() })
	waitExited(t, tr)
	if st := tr.ExitStatus(); st.Code == nil || *st.Code != 3 {
		t.Fatalf("exit status %+v, want code 3", st)
	}
	// The init's own exit empties the cgroup (populated 0, what Terminate
	// reads); a process's environ is unreadable already while it exits,
	// so the marked-process scan alone would race with it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		populated, err := cgroup.Populated(tr.cg.path)
		if err != nil {
			t.Fatal(err)
		}
		if !populated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cgroup is still populated after the provider's exit: %v alive", proctest.Alive(mark))
		}
		time.Sleep(5 * time.Millisecond) // the init's own exit; bounded
	}
	if alive := proctest.Alive(mark); len(alive) > 0 {
		t.Fatalf("still alive after the cgroup emptied: %v", alive)
	}
	term := tr.Terminate(context.Background(), termGrace, killGrace)
	requireComplete(t, term, ModeCgroup)
	if len(term.Signals) != 0 {
		t.Errorf("signals %v sent to a tree that had emptied", sigNames(term))
	}
}

// TestSandboxed_RuleMovedLaunchesNothing: a plan whose writable rule
// path was replaced by a link after planning fails Start with
// launchexec.ErrSandbox (sandbox.ErrRuleMoved), nothing left running and
// the cgroup gone.
func TestSandboxed_RuleMovedLaunchesNothing(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeCgroup, mark)
	base := t.TempDir()
	work := filepath.Join(base, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	plan := ownTreePlan(t, work)
	if err := os.Rename(work, work+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), work); err != nil {
		t.Fatal(err)
	}
	_, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", "sleep 100"}, Env: env, Dir: "/", Name: "test", Sandbox: plan})
	if !errors.Is(err, launchexec.ErrSandbox) || !errors.Is(err, sandbox.ErrRuleMoved) {
		t.Fatalf("Start: %v, want launchexec.ErrSandbox wrapping sandbox.ErrRuleMoved", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(proctest.Alive(mark)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("left running: %v", proctest.Alive(mark))
		}
		time.Sleep(5 * time.Millisecond) // the init's reaping by the central reaper; bounded
	}
}
