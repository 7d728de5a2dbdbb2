package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// orphans reaps processes re-parented to the test process: the test makes
// itself a child subreaper (PID 1 here never reaps, TESTING.md), so the
// guardians and providers of a SIGKILLed sidecar come to it and do not stay
// zombies forever. Processes started through exec.Cmd are left to their
// Wait.
var orphans struct {
	once    sync.Once
	mu      sync.Mutex
	tracked map[int]bool
	stop    chan struct{}
	done    chan struct{}
}

func trackChild(pid int) {
	orphans.mu.Lock()
	if orphans.tracked == nil {
		orphans.tracked = map[int]bool{}
	}
	orphans.tracked[pid] = true
	orphans.mu.Unlock()
}

// startOrphanReaper starts the reaping loop once; stopOrphanReaper (from
// TestMain) ends it.
func startOrphanReaper(t *testing.T) {
	orphans.once.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			t.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
		}
		orphans.stop, orphans.done = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(orphans.done)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				reapUntracked()
				select {
				case <-orphans.stop:
					return
				case <-tick.C:
				}
			}
		}()
	})
}

func stopOrphanReaper() {
	if orphans.stop != nil {
		close(orphans.stop)
		<-orphans.done
	}
}

// reapUntracked reaps zombie children of this process not started by
// exec.Cmd.
func reapUntracked() {
	me := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z' {
			continue
		}
		var st byte
		var ppid int
		if _, err := fmtSscan(string(stat[i+2:]), &st, &ppid); err != nil || ppid != me {
			continue
		}
		orphans.mu.Lock()
		mine := orphans.tracked[pid]
		orphans.mu.Unlock()
		if !mine {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

// guardiansOf lists the guardian processes (children of pid running the
// sidecar binary with the __guardian argument).
func guardiansOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || !bytes.Contains(cmd, []byte("__guardian")) {
			continue
		}
		var st byte
		var ppid int
		if _, err := fmtSscan(string(stat[i+2:]), &st, &ppid); err == nil && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

type recoveredProof struct {
	Proof proof `json:"proof"`
}

// killMarkedOnCleanup SIGKILLs, by pid, whatever still carries mark when
// the test ends, so a failing test cannot leak (PID 1 here never reaps).
func killMarkedOnCleanup(t *testing.T, mark string) {
	t.Cleanup(func() {
		for _, pid := range markedPids(mark, "") {
			t.Logf("killing leftover marked pid %d", pid)
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	})
}

// openFault opens a fault-agent session with the given modes and marker.
func openFault(t *testing.T, s *sidecar, key, cwd, mark string, modes string) openResult {
	t.Helper()
	var open openResult
	s.mustCall("session/open", map[string]any{"sessionKey": key, "agent": "generic",
		"command": map[string]any{"path": faultBin, "args": []string{"--mode", modes}}, "cwd": cwd,
		"env": map[string]string{"ACPX_TEST_MARK": mark}}, &open)
	return open
}

// TestSidecarKilled_GuardiansLeaveNothingAlive: issue 4 — the sidecar is
// SIGKILLed with live sessions (one with a setsid'd grandchild that ignores
// SIGTERM); every guardian sees its owner pipe close and kills its tree:
// nothing of any session stays alive (checked in /proc). The next sidecar
// on the same stateDir reports each ledger entry as a recovered proof and
// clears the ledger. Both containment modes.
func TestSidecarKilled_GuardiansLeaveNothingAlive(t *testing.T) {
	startOrphanReaper(t)
	for _, mode := range []string{"cgroup", "subreaper", "process-group"} {
		t.Run(mode, func(t *testing.T) {
			stateDir, cwd := t.TempDir(), t.TempDir()
			mark := testmark.New()
			killMarkedOnCleanup(t, mark)
			s := startSidecar(t, "--state-dir", stateDir, "--containment", mode)
			trackChild(s.cmd.Process.Pid)
			s.initialize(false)
			openFault(t, s, "a", cwd, mark, "normal")
			openFault(t, s, "b", cwd, mark, "grandchild")
			if n := len(markedPids(mark, "")); n < 3 {
				t.Fatalf("expected provider + grandchild processes to be alive, saw %d", n)
			}
			if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-s.exited
			waitNoMarked(t, mark, cwd, 10*time.Second)

			s2 := startSidecar(t, "--state-dir", stateDir, "--containment", mode)
			trackChild(s2.cmd.Process.Pid)
			s2.initialize(false)
			for _, key := range []string{"a", "b"} {
				raw := s2.waitNote("cleanup/proof", 10*time.Second, func(p json.RawMessage) bool {
					var rp recoveredProof
					return json.Unmarshal(p, &rp) == nil && rp.Proof.SessionKey == key && rp.Proof.Origin == "recovered"
				})
				var rp recoveredProof
				_ = json.Unmarshal(raw, &rp)
				if !rp.Proof.Complete {
					t.Errorf("recovered proof for %q not complete: %+v", key, rp.Proof)
				}
			}
			s2.waitFor(5*time.Second, "empty ownership ledger", func() bool {
				ents, _ := os.ReadDir(filepath.Join(stateDir, "owned"))
				return len(ents) == 0
			})
			if _, status := s2.shutdownAndExit(); status != 0 {
				t.Errorf("exit status %d", status)
			}
		})
	}
}

// TestSidecarKilled_LedgerRecoversWhatTheGuardianMissed: issue 4's second
// line — the sidecar and its guardian are both SIGKILLed, so the provider
// tree survives (asserted, or the test proves nothing): in its cgroup, or,
// in process-group mode, as a setsid'd grandchild outside the provider's
// group found by the tree's environment marker (ACPX_SIDECAR_SESSION); the
// next sidecar on the same stateDir kills it from the ownership ledger and
// reports a complete cleanup/proof with origin "recovered" naming every
// survivor.
func TestSidecarKilled_LedgerRecoversWhatTheGuardianMissed(t *testing.T) {
	startOrphanReaper(t)
	for _, mode := range []string{"cgroup", "subreaper", "process-group"} {
		t.Run(mode, func(t *testing.T) { ledgerRecovers(t, mode) })
	}
}

func ledgerRecovers(t *testing.T, mode string) {
	stateDir, cwd := t.TempDir(), t.TempDir()
	mark := testmark.New()
	killMarkedOnCleanup(t, mark)
	s := startSidecar(t, "--state-dir", stateDir, "--containment", mode)
	trackChild(s.cmd.Process.Pid)
	s.initialize(false)
	open := openFault(t, s, "survivor", cwd, mark, "grandchild")
	gs := guardiansOf(s.cmd.Process.Pid)
	if len(gs) != 1 {
		t.Fatalf("expected one guardian under the sidecar, found %v", gs)
	}
	// Stop the guardian so it cannot act on its owner pipe, kill the
	// sidecar, then kill the guardian: the provider is left in its cgroup.
	if err := unix.Kill(gs[0], unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	_ = unix.Kill(gs[0], unix.SIGKILL)
	// SIGKILL to a stopped process completes asynchronously: wait until the
	// guardian is a zombie (or reaped) before listing survivors.
	for deadline := time.Now().Add(5 * time.Second); ; {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(gs[0]) + "/stat")
		i := bytes.LastIndexByte(b, ')')
		if err != nil || i < 0 || i+2 >= len(b) || b[i+2] == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the SIGKILLed guardian %d is still alive", gs[0])
		}
		time.Sleep(5 * time.Millisecond) // polling /proc, bounded
	}
	// The provider itself may die of SIGPIPE on its stderr now; its setsid'd
	// grandchild (which ignores TERM and writes nothing) stays in the cgroup.
	survivors := markedPids(mark, "")
	if len(survivors) == 0 {
		t.Fatalf("nothing survived the guardian: this test would prove nothing")
	}
	s2 := startSidecar(t, "--state-dir", stateDir, "--containment", mode)
	trackChild(s2.cmd.Process.Pid)
	s2.initialize(false)
	raw := s2.waitNote("cleanup/proof", 10*time.Second, func(p json.RawMessage) bool {
		var rp recoveredProof
		return json.Unmarshal(p, &rp) == nil && rp.Proof.Origin == "recovered"
	})
	var rp recoveredProof
	_ = json.Unmarshal(raw, &rp)
	if !rp.Proof.Complete || rp.Proof.SessionKey != "survivor" || rp.Proof.Session != open.Session {
		t.Fatalf("recovered proof: %+v", rp.Proof)
	}
	named := map[int]bool{}
	for _, p := range rp.Proof.Processes {
		named[p.Pid] = true
	}
	for _, pid := range survivors {
		// The provider itself may still be dying of SIGPIPE when survivors
		// were listed; its setsid'd grandchild cannot die on its own.
		if pid != open.Process.Pid && !named[pid] {
			t.Errorf("recovered proof does not name surviving process %d: %+v", pid, rp.Proof.Processes)
		}
	}
	waitNoMarked(t, mark, cwd, 5*time.Second)
	if _, status := s2.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}

// TestSidecarKilled_LedgerEntryWrittenBeforeLaunchIsRecovered: a sidecar
// killed between its ledger entry and the launch's completion leaves an
// entry without a pid; the next sidecar finds the tree by its environment
// marker (and the cgroup glob) and reports it recovered.
func TestSidecarKilled_LedgerEntryWrittenBeforeLaunchIsRecovered(t *testing.T) {
	startOrphanReaper(t)
	stateDir := t.TempDir()
	mark := testmark.New()
	killMarkedOnCleanup(t, mark)
	// A dead "sidecar": a pid no process has.
	deadPid := 4194000
	for ; deadPid > 1000; deadPid-- {
		if _, err := os.Stat("/proc/" + strconv.Itoa(deadPid)); os.IsNotExist(err) {
			break
		}
	}
	session := "s-" + randHex(8)
	marker := "ACPX_SIDECAR_SESSION=" + session
	leftover := exec.Command("/bin/sleep", "300")
	leftover.Env = append(os.Environ(), marker, "ACPX_TEST_MARK="+mark)
	leftover.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := leftover.Start(); err != nil {
		t.Fatal(err)
	}
	trackChild(leftover.Process.Pid)
	waited := make(chan struct{})
	go func() { _ = leftover.Wait(); close(waited) }()
	if err := os.MkdirAll(filepath.Join(stateDir, "owned"), 0o700); err != nil {
		t.Fatal(err)
	}
	entry, _ := json.Marshal(map[string]any{"id": session, "sidecarPid": deadPid, "session": session,
		"sessionKey": "pending", "pid": 0, "startTime": 0, "pgid": 0, "marker": marker, "containment": "process-group",
		"createdAt": "2026-11-29T00:00:00Z"})
	if err := os.WriteFile(filepath.Join(stateDir, "owned", session+".json"), entry, 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSidecar(t, "--state-dir", stateDir)
	trackChild(s.cmd.Process.Pid)
	s.initialize(false)
	raw := s.waitNote("cleanup/proof", 10*time.Second, nil)
	var rp recoveredProof
	_ = json.Unmarshal(raw, &rp)
	if rp.Proof.Origin != "recovered" || !rp.Proof.Complete || rp.Proof.Session != session {
		t.Fatalf("recovered proof: %s", raw)
	}
	named := false
	for _, p := range rp.Proof.Processes {
		named = named || p.Pid == leftover.Process.Pid
	}
	if !named {
		t.Errorf("the leftover %d is not named: %s", leftover.Process.Pid, raw)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatalf("the leftover %d is still running", leftover.Process.Pid)
	}
	_, _ = s.shutdownAndExit()
}

// fmtSscan reads the state and ppid fields that follow "comm) ".
func fmtSscan(s string, st *byte, ppid *int) (int, error) {
	var state string
	n, err := fmt.Sscanf(s, "%s %d", &state, ppid)
	if len(state) > 0 {
		*st = state[0]
	}
	return n, err
}
