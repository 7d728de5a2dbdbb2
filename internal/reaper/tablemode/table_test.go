//go:build linux

package tablemode

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
	"github.com/acpx-sidecar/acpx-sidecar/internal/proctest"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
)

// newTableSup makes a Supervisor (this process a child subreaper, as
// cmd/acpx-sidecar makes it) and registers, LIFO, its Close and a safety
// net that kills anything a failed test left with its marker.
func newTableSup(t *testing.T, mark string) *Supervisor {
	t.Helper()
	if err := reaper.BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	t.Cleanup(func() {
		for _, pid := range proctest.Alive(mark) {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	})
	return s
}

func startTableSh(t *testing.T, s *Supervisor, env []string, script string) *Tree {
	t.Helper()
	tr, err := s.Start(reaper.Spec{Path: "/bin/sh", Args: []string{"-c", script}, Env: env, Dir: "/"})
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

func requireTableComplete(t *testing.T, term reaper.Termination) {
	t.Helper()
	if !term.Complete || !term.Verified.TreeEmpty || term.Containment != reaper.ModeProcessTable || term.Verified.Method != methodTable {
		t.Fatalf("termination not a complete process-table proof: %+v", term)
	}
}

// TestTable_LeaderExitClosesExitedWithCode: the leader's wait status is
// collected (Exited closes, ExitStatus holds the code) and the proof lists
// it as the provider.
func TestTable_LeaderExitClosesExitedWithCode(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newTableSup(t, mark)
	tr := startTableSh(t, s, env, "exit 7")
	select {
	case <-tr.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("leader not reaped within deadline")
	}
	if st := tr.ExitStatus(); st.Code == nil || *st.Code != 7 || st.Signal != "" {
		t.Fatalf("exit status %+v, want code 7", st)
	}
	term := tr.Terminate(context.Background(), termGrace, killGrace)
	requireTableComplete(t, term)
	if len(term.Signals) != 0 {
		t.Errorf("signals %v sent to a tree that had already ended", sigNames(term))
	}
	if p, ok := findProc(term, tr.Pid()); !ok || p.Role != reaper.RoleProvider || p.ExitCode == nil || *p.ExitCode != 7 || !p.Reaped {
		t.Fatalf("provider record %+v (%v), want code 7, reaped", p, ok)
	}
	if tr.Containment() != reaper.ModeProcessTable || tr.CgroupPath() != "" || tr.Pgid() != tr.Pid() || tr.StartTicks() == 0 {
		t.Fatalf("tree identity: containment %q cgroup %q pgid %d pid %d start %d", tr.Containment(), tr.CgroupPath(), tr.Pgid(), tr.Pid(), tr.StartTicks())
	}
	if again := tr.Terminate(context.Background(), termGrace, killGrace); !again.Complete || len(again.Processes) != len(term.Processes) {
		t.Fatalf("second Terminate %+v, want the same complete result", again)
	}
}

// TestTable_IgnoredTermGetsKilled: a group member ignoring SIGTERM gets
// SIGKILL after termGrace; the proof is complete.
func TestTable_IgnoredTermGetsKilled(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newTableSup(t, mark)
	tr := startTableSh(t, s, env, `trap "" TERM; echo up; while :; do sleep 1; done`)
	proctest.ReadLines(t, tr, 1)
	term := tr.Terminate(context.Background(), termGrace, killGrace)
	requireTableComplete(t, term)
	if got := strings.Join(sigNames(term), ","); got != "SIGTERM,SIGKILL" {
		t.Fatalf("signals %s, want SIGTERM,SIGKILL", got)
	}
	if p, ok := findProc(term, tr.Pid()); !ok || p.Signal != "SIGKILL" {
		t.Fatalf("provider record %+v, want killed by SIGKILL", p)
	}
	proctest.RequireNoneAlive(t, mark)
}

// TestTable_SetsidGrandchildKilledAndListed: a grandchild that left the
// provider's session and group and ignores SIGTERM is found (parent chain
// while the provider lives, and the marker) and killed; the proof names it
// as a descendant.
func TestTable_SetsidGrandchildKilledAndListed(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newTableSup(t, mark)
	tr := startTableSh(t, s, env, `setsid sh -c 'trap "" TERM; echo $$; exec sleep 30' & wait`)
	gc, err := strconv.Atoi(proctest.ReadLines(t, tr, 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	if p, err := procsOf(t).Stat(gc); err != nil || p.Pgid == tr.Pgid() {
		t.Fatalf("grandchild %d: %+v %v; want it outside the provider's group", gc, p, err)
	}
	term := tr.Terminate(context.Background(), termGrace, killGrace)
	requireTableComplete(t, term)
	if p, ok := findProc(term, gc); !ok || p.Role != reaper.RoleDescendant {
		t.Fatalf("grandchild %d not listed as a descendant: %+v", gc, term.Processes)
	}
	proctest.RequireNoneAlive(t, mark)
}

// TestTable_OrphanedEscapeeFoundByMarker: the provider double-forks a
// setsid'd process whose parent exits at once, before any scan can see the
// chain; the escapee keeps its environment, so the marker finds it, and it
// is killed and listed.
func TestTable_OrphanedEscapeeFoundByMarker(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newTableSup(t, mark)
	tr := startTableSh(t, s, env, `(setsid sh -c 'trap "" TERM; echo $$; exec sleep 30' &); read x`)
	esc, err := strconv.Atoi(proctest.ReadLines(t, tr, 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		p, err := procsOf(t).Stat(esc)
		if err == nil && p.PPid != tr.Pid() && p.Pgid != tr.Pgid() {
			break // orphaned: no parent chain leads to the tree
		}
		if time.Now().After(deadline) {
			t.Fatalf("escapee %d not orphaned: %+v %v", esc, p, err)
		}
		time.Sleep(2 * time.Millisecond) // polling the table, bounded
	}
	term := tr.Terminate(context.Background(), termGrace, killGrace)
	requireTableComplete(t, term)
	if p, ok := findProc(term, esc); !ok || p.Role != reaper.RoleDescendant {
		t.Fatalf("escapee %d not listed: %+v", esc, term.Processes)
	}
	proctest.RequireNoneAlive(t, mark)
}

// TestTable_LimitsRefusedNothingLaunched: limits cannot be enforced
// without a cgroup: ErrLimitsUnsupported, and no process started.
func TestTable_LimitsRefusedNothingLaunched(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newTableSup(t, mark)
	_, err := s.Start(reaper.Spec{Path: "/bin/sleep", Args: []string{"30"}, Env: env, Limits: reaper.Limits{Pids: 8}})
	if !errors.Is(err, reaper.ErrLimitsUnsupported) {
		t.Fatalf("Start with limits: %v, want ErrLimitsUnsupported", err)
	}
	proctest.RequireNoneAlive(t, mark)
	if reaper.SandboxSupported(reaper.ModeProcessTable) {
		t.Fatal("SandboxSupported(process-table): want refused")
	}
	if reaper.ModeProcessTable.EnforcesLimits() || !reaper.ModeCgroup.EnforcesLimits() {
		t.Fatal("EnforcesLimits: only cgroup")
	}
}

// TestTable_SealBlocksStartAndExecFileRuns: after Seal nothing starts;
// before it, ExecFile (not Path) is what runs.
func TestTable_SealBlocksStartAndExecFileRuns(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newTableSup(t, mark)
	f, err := os.Open("/bin/echo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := s.Start(reaper.Spec{Path: "/nonexistent/echo", Args: []string{"from-execfile"}, Env: env, ExecFile: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Stdin().Close(); tr.Stdout().Close(); tr.Stderr().Close() })
	if got := proctest.ReadLines(t, tr, 1)[0]; got != "from-execfile" {
		t.Fatalf("stdout %q", got)
	}
	requireTableComplete(t, tr.Terminate(context.Background(), termGrace, killGrace))
	s.Seal()
	if _, err := s.Start(reaper.Spec{Path: "/bin/sleep", Args: []string{"30"}, Env: env}); !errors.Is(err, reaper.ErrSealed) {
		t.Fatalf("Start after Seal: %v", err)
	}
	proctest.RequireNoneAlive(t, mark)
}

// TestTable_MarkerAddedWhenEnvHasNone: a spec without the marker variable
// gets one, and the tree's processes carry it.
func TestTable_MarkerAddedWhenEnvHasNone(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newTableSup(t, mark)
	tr := startTableSh(t, s, env, "echo up; read x")
	proctest.ReadLines(t, tr, 1)
	got, err := procsOf(t).Environ(tr.Pid())
	if err != nil || !proctable.HasEntry(got, tr.marker) || !strings.HasPrefix(tr.marker, DefaultMarkerName+"=t-") {
		t.Fatalf("provider environment %q (%v) lacks the tree marker %q", got, err, tr.marker)
	}
	requireTableComplete(t, tr.Terminate(context.Background(), termGrace, killGrace))
}

// TestNew_RefusedWhileSupervisorReaps: the two owners of
// child reaping cannot share a process.
func TestNew_RefusedWhileSupervisorReaps(t *testing.T) {
	mark, _ := proctest.NewMark(t)
	newSup(t, reaper.ModeSubreaper, mark)
	if s, err := New(Options{}); !errors.Is(err, reaper.ErrUnsupported) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("NewTableSupervisor beside a Supervisor: %v, want ErrUnsupported", err)
	}
}

// TestRecover_KillsLeftoverByGroupAndMarker: a tree no sidecar owns
// (a provider in its own group with a setsid'd grandchild, both ignoring
// SIGTERM) is killed from its ledger identity, and the proof names both;
// the same identity with a digest its live leader does not carry (a forged
// entry) is refused with ErrUnprovable and kills nothing.
func TestRecover_KillsLeftoverByGroupAndMarker(t *testing.T) {
	if err := reaper.BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	mark, env := proctest.NewMark(t)
	session := "s-7ab1e"
	marker := reaper.MarkerEnv + "=" + session + "." + mark
	cmd := exec.Command("/bin/sh", "-c", `trap "" TERM; setsid sh -c 'trap "" TERM; echo $$; exec sleep 30' & read x`)
	cmd.Env = append(env, marker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range proctest.Alive(mark) {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		stdin.Close()
		_ = cmd.Wait()
		reapZombieChildren()
	})
	gc, err := strconv.Atoi(proctest.ReadLines(t, stdoutOf{out}, 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	// The grandchild prints its pid before it execs sleep; while execve
	// builds the new image its environ reads empty, so wait until it runs
	// sleep (a scan before the exec could see it, then miss it during
	// the exec: a CI flake) and the marker scan sees it.
	proctest.WaitComm(t, gc, "sleep")
	proctest.WaitListed(t, mark, gc)
	p, err := procsOf(t).Stat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	l := reaper.Leftover{Pid: cmd.Process.Pid, StartTicks: p.Start, Pgid: cmd.Process.Pid, Session: session, MarkerSHA256: reaper.MarkerDigest(marker)}
	forged := l
	forged.MarkerSHA256 = reaper.MarkerDigest(marker + "x")
	if _, err := Recover(forged, killGrace); !errors.Is(err, reaper.ErrUnprovable) {
		t.Fatalf("an entry whose live leader does not carry its marker: %v, want ErrUnprovable", err)
	}
	if n := len(proctest.Alive(mark)); n != 2 {
		t.Fatalf("a refused entry killed something: %d of 2 marked processes alive", n)
	}
	term, err := Recover(l, killGrace)
	if err != nil {
		t.Fatal(err)
	}
	if !term.Complete || !term.Verified.TreeEmpty || term.Containment != reaper.ModeProcessTable || term.Verified.Method != methodTableRecovered {
		t.Fatalf("recovery not complete: %+v", term)
	}
	for pid, role := range map[int]string{cmd.Process.Pid: reaper.RoleProvider, gc: reaper.RoleDescendant} {
		if pr, ok := findProc(term, pid); !ok || pr.Role != role || pr.Signal != "SIGKILL" {
			t.Errorf("pid %d: record %+v (%v), want %s killed by SIGKILL", pid, pr, ok, role)
		}
	}
	proctest.RequireNoneAlive(t, mark)
}

// reapZombieChildren reaps whatever children of this process exited (the
// re-parented orphans of a recovery test).
func reapZombieChildren() {
	for {
		var ws unix.WaitStatus
		if pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); err != nil || pid <= 0 {
			return
		}
	}
}

// stdoutOf is a plain pipe as readLines takes it.
type stdoutOf struct{ r io.ReadCloser }

func (s stdoutOf) Stdout() io.ReadCloser { return s.r }

func procsOf(t *testing.T) proctable.Reader {
	t.Helper()
	r, err := proctable.New()
	if err != nil {
		t.Fatal(err)
	}
	return r
}
