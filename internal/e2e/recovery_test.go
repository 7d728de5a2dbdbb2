package e2e

// Recovery: a sidecar killed with live sessions leaves nothing alive (its
// guardians end the trees) and the next sidecar recovers what is left from
// the ownership ledger; a resumed session gets back what the host pinned
// (docs/protocol.md, Resume semantics).

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// TestSidecarKilled_GuardiansLeaveNothingAlive: the sidecar is SIGKILLed
// with live sessions (one with a setsid'd grandchild that ignores SIGTERM);
// every guardian sees its owner pipe close and kills its tree: nothing of
// any session stays alive (checked in /proc). The next sidecar on the same
// stateDir reports each ledger entry as a recovered proof and clears the
// ledger. Both containment modes.
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
			a := openFault(t, s, "a", cwd, mark, "normal")
			openFault(t, s, "b", cwd, mark, "grandchild")
			if a.Sandbox == nil || a.Sandbox.TmpDir == "" {
				t.Fatalf("sandbox %+v: want the default sandbox with a private TMPDIR", a.Sandbox)
			}
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
				return len(ledgerEntries(t, stateDir)) == 0
			})
			// The dead sidecar's private TMPDIR of the recovered session
			// goes with its ledger entry (docs/protocol.md §19).
			waitGone(t, a.Sandbox.TmpDir, 5*time.Second)
			if _, status := s2.shutdownAndExit(); status != 0 {
				t.Errorf("exit status %d", status)
			}
		})
	}
}

// TestSidecarKilled_LedgerRecoversWhatTheGuardianMissed: the second line of
// defence — the sidecar and its guardian are both SIGKILLed, so the provider
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
	waitStopped(t, gs, 5*time.Second) // SIGSTOP is only queued when kill returns
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
	if rp.Proof.Containment != mode {
		// Reported under the name the tree was launched with (§2).
		t.Errorf("recovered proof containment %q, want %q", rp.Proof.Containment, mode)
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
// marker (the entry keeps its SHA-256) and reports it recovered — for an
// entry of a process-group sidecar with reaper.Recover, for one of a
// process-table sidecar with that mode's own rules (containment
// "process-table").
func TestSidecarKilled_LedgerEntryWrittenBeforeLaunchIsRecovered(t *testing.T) {
	startOrphanReaper(t)
	for _, containment := range []string{"process-group", "process-table"} {
		t.Run(containment, func(t *testing.T) { preLaunchEntryRecovered(t, containment) })
	}
}

func preLaunchEntryRecovered(t *testing.T, containment string) {
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
	marker := "ACPX_SIDECAR_SESSION=" + session + "." + randHex(16) // as a sidecar makes it: id and token
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
		"sessionKey": "pending", "pid": 0, "startTime": 0, "pgid": 0, "markerSha256": sha256Hex(marker), "containment": containment,
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
	if rp.Proof.Origin != "recovered" || !rp.Proof.Complete || rp.Proof.Session != session || rp.Proof.Containment != containment {
		t.Fatalf("recovered proof (want containment %s): %s", containment, raw)
	}
	named := false
	for _, p := range rp.Proof.Processes {
		named = named || p.Pid == leftover.Process.Pid && p.Signal == "SIGKILL"
	}
	if !named {
		t.Errorf("the leftover %d is not named as killed: %s", leftover.Process.Pid, raw)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatalf("the leftover %d is still running", leftover.Process.Pid)
	}
	_, _ = s.shutdownAndExit()
}

// TestResume_PinnedModelAndModeReappliedWhenTheAgentForgetsThem:
// setModel/setMode are persisted in the record's acpx state; an agent whose
// session/load reports its defaults again gets the pinned model and mode
// re-applied and verified, so a resumed session never silently runs another
// model.
func TestResume_PinnedModelAndModeReappliedWhenTheAgentForgetsThem(t *testing.T) {
	e := newFaultEnv(t)
	agentState := agentWritableDir(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := withHostHome(e.openParams("pinned", "load-resets-controls"))
	p["command"] = map[string]any{"path": faultBin, "args": []string{"--mode", "load-resets-controls", "--state-dir", agentState}}
	var open struct {
		Session string `json:"session"`
		Modes   struct {
			Available []string `json:"availableModeIds"`
		} `json:"modes"`
	}
	s.mustCall("session/open", p, &open)
	s.mustCall("session/setModel", map[string]any{"session": open.Session, "model": "fa-large"}, nil)
	var mode string
	for _, m := range open.Modes.Available {
		if m != "default" {
			mode = m
		}
	}
	if mode == "" {
		t.Fatalf("the fault agent offers no second mode: %v", open.Modes.Available)
	}
	s.mustCall("session/setMode", map[string]any{"session": open.Session, "mode": mode}, nil)
	// A session that never ran a turn is not resumed (nothing to resume).
	s.mustCall("session/prompt", map[string]any{"session": open.Session, "requestId": "t1", "prompt": "hi"}, nil)
	s.mustCall("session/close", map[string]any{"session": open.Session, "reason": "pause"}, nil)

	var again struct {
		Session string `json:"session"`
		Resumed bool   `json:"resumed"`
		Models  struct {
			Current string `json:"currentModelId"`
		} `json:"models"`
		Modes struct {
			Current string `json:"currentModeId"`
		} `json:"modes"`
	}
	s.mustCall("session/open", p, &again)
	if !again.Resumed || again.Models.Current != "fa-large" || again.Modes.Current != mode {
		t.Fatalf("resumed open: %+v (want fa-large / %s)", again, mode)
	}
	var st struct {
		Models struct {
			Current string `json:"currentModelId"`
		} `json:"models"`
	}
	s.mustCall("session/status", map[string]any{"session": again.Session}, &st)
	if st.Models.Current != "fa-large" {
		t.Errorf("status after resume: model %q", st.Models.Current)
	}
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestLiveSweep_DeadNeighbourRecoveredWithinAnInterval (issue 33): two
// sidecars share a state dir; one is SIGKILLed (its guardian or watchdog
// stopped first, so its tree survives it); the other, still running,
// recovers the dead one's leftovers within its --sweep-interval-ms — a
// recovered proof naming the survivors reaches its own host, no marked
// process is left, the ledger entry is gone — in cgroup, subreaper and
// process-table containment.
func TestLiveSweep_DeadNeighbourRecoveredWithinAnInterval(t *testing.T) {
	startOrphanReaper(t)
	for _, mode := range []string{"cgroup", "subreaper", "process-table"} {
		t.Run(mode, func(t *testing.T) { liveNeighbourSweeps(t, mode) })
	}
}

func liveNeighbourSweeps(t *testing.T, mode string) {
	stateDir, cwd := t.TempDir(), t.TempDir()
	mark := testmark.New()
	killMarkedOnCleanup(t, mark)
	live := startSidecar(t, "--state-dir", stateDir, "--containment", mode, "--sweep-interval-ms", "300")
	trackChild(live.cmd.Process.Pid)
	live.initialize(false)
	// The live one uses the state dir too (a session of its own).
	ownMark := testmark.New()
	killMarkedOnCleanup(t, ownMark)
	own := openFault(t, live, "own", cwd, ownMark, "normal")

	dying := startSidecar(t, "--state-dir", stateDir, "--containment", mode, "--sweep-interval-ms", "0")
	trackChild(dying.cmd.Process.Pid)
	dying.initialize(false)
	open := openFault(t, dying, "leftover", cwd, mark, "grandchild")
	// The agent's setsid'd grandchild ignores SIGTERM and holds none of
	// the sidecar's pipes: only a SIGKILL ends it, so it tells whether the
	// tree outlived its sidecar.
	grandchild := waitGrandchild(t, mark, 5*time.Second)
	gs := guardiansOf(dying.cmd.Process.Pid)
	if mode != "process-table" && len(gs) == 0 {
		t.Fatalf("no guardian or watchdog under the dying sidecar %d", dying.cmd.Process.Pid)
	}
	for _, g := range gs {
		if err := unix.Kill(g, unix.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	// kill(2) only queues SIGSTOP: a guardian thread still running could
	// read its owner pipe's EOF. Go on once every thread is stopped.
	waitStopped(t, gs, 5*time.Second)
	// The tree is listed while its sidecar still runs: once the sidecar is
	// dead, the live sidecar's sweep (what this test is about) may kill
	// the tree before a listing made afterwards would see it.
	survivors := markedPids(mark, "")
	_ = dying.cmd.Process.Signal(syscall.SIGKILL)
	<-dying.exited
	for _, g := range gs {
		_ = unix.Kill(g, unix.SIGKILL)
	}
	raw := live.waitNote("cleanup/proof", 10*time.Second, func(p json.RawMessage) bool {
		var rp recoveredProof
		return json.Unmarshal(p, &rp) == nil && rp.Proof.Origin == "recovered" && rp.Proof.SessionKey == "leftover"
	})
	var rp recoveredProof
	_ = json.Unmarshal(raw, &rp)
	if !rp.Proof.Complete || rp.Proof.Session != open.Session {
		t.Fatalf("recovered proof: %+v", rp.Proof)
	}
	named := map[int]bool{}
	for _, p := range rp.Proof.Processes {
		named[p.Pid] = true
	}
	// The grandchild outlived the sidecar if it is still alive, or if the
	// recovery named it: recovery starts only once the owner is dead, and
	// names only live processes it found carrying the tree's marker. Not
	// checked in cgroup mode: any sidecar starting on this machine sweeps
	// the cgroups of dead sidecars (reaper.SweepDeadParents) and may end
	// the tree before the live one finds it; there the watchdog, stopped
	// before the kill, is what lets the tree outlive the sidecar.
	if len(survivors) == 0 || mode != "cgroup" && !named[grandchild] && !isMarkedAlive(mark, grandchild) {
		t.Fatalf("nothing of the dead sidecar's tree survived: this test would prove nothing")
	}
	for _, pid := range survivors {
		if pid != open.Process.Pid && !named[pid] && isMarkedAlive(mark, pid) {
			t.Errorf("recovered proof does not name surviving process %d: %+v", pid, rp.Proof.Processes)
		}
	}
	waitNoMarked(t, mark, "", 5*time.Second)
	live.waitFor(5*time.Second, "the dead sidecar's ledger entry removed", func() bool {
		return len(ledgerEntries(t, stateDir)) == 1 // the live session's own
	})
	closeClean(t, live, own.Session, ownMark, "")
	if _, status := live.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}
