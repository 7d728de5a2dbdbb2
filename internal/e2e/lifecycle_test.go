package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestShutdown_StdinEOFMidTurnAnswersTheTurn: PROTOCOL §2.4 — stdin EOF is
// shutdown then exit, so a turn still running gets its answer (cancelled)
// on stdout before the sidecar exits, and the tree is gone.
func TestShutdown_StdinEOFMidTurnAnswersTheTurn(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	var open openResult
	s.mustCall("session/open", e.openParams("eof", "slow-turn=60000"), &open)
	turn := s.start("session/prompt", map[string]any{"session": open.Session, "requestId": "t1", "prompt": "wait"})
	// The turn must be running before stdin ends.
	s.waitFor(10*time.Second, "the turn to start", func() bool {
		for _, n := range s.notes {
			var u updateNote
			if n.Method == "session/update" && json.Unmarshal(n.Params, &u) == nil && u.RequestID != nil && *u.RequestID == "t1" {
				return true
			}
		}
		return false
	})
	if err := s.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	f := s.await(turn, 30*time.Second)
	var res struct {
		Status string `json:"status"`
	}
	if f.Error != nil || json.Unmarshal(f.Result, &res) != nil || res.Status != "cancelled" {
		t.Fatalf("turn answer after stdin EOF: %+v %s", f.Error, f.Result)
	}
	<-s.exited
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestResume_PinnedModelAndModeReappliedWhenTheAgentForgetsThem: issue 5 —
// setModel/setMode are persisted in the record's acpx state; an agent whose
// session/load reports its defaults again gets the pinned model and mode
// re-applied and verified, so a resumed session never silently runs
// another model.
func TestResume_PinnedModelAndModeReappliedWhenTheAgentForgetsThem(t *testing.T) {
	e := newFaultEnv(t)
	agentState := t.TempDir()
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("pinned", "load-resets-controls")
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

// TestShutdown_HostThatStopsReadingCannotPinTheSidecar: a host that stops
// reading stdout blocks every write; on SIGTERM the sidecar still exits
// (after its shutdown bound plus a margin) and, because every guardian's
// owner pipe closes with it, nothing of the session survives.
func TestShutdown_HostThatStopsReadingCannotPinTheSidecar(t *testing.T) {
	startOrphanReaper(t)
	e := newFaultEnv(t)
	cmd := exec.Command(sidecarBin, "--state-dir", e.stateDir, "--shutdown-ms", "500")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe() // never read after the open's answer
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	trackChild(cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	send := func(m map[string]any) {
		b, _ := json.Marshal(m)
		if _, err := stdin.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{"protocolVersion": 1}})
	send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "session/open", "params": e.openParams("stuck", "flood=2000000")})
	// Read until the open's answer, then stop reading for good.
	r := bufio.NewReader(stdout)
	var session string
	for session == "" {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the open's answer: %v", err)
		}
		var f struct {
			ID     int `json:"id"`
			Result struct {
				Session string `json:"session"`
			} `json:"result"`
		}
		if json.Unmarshal(line, &f) == nil && f.ID == 2 {
			session = f.Result.Session
		}
	}
	send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": map[string]any{"session": session, "requestId": "t", "prompt": "go"}})
	if len(markedPids(e.mark, "")) == 0 {
		t.Fatalf("no provider alive")
	}
	// Wait until the stdout pipe is full: from now on every write of the
	// sidecar blocks (bounded wait on the pipe's fill level).
	fd := int(stdout.(*os.File).Fd())
	for deadline := time.Now().Add(20 * time.Second); ; {
		n, err := unix.IoctlGetInt(fd, unix.TIOCINQ)
		if err != nil {
			t.Fatal(err)
		}
		if n >= 64<<10-4096 || r.Buffered() > 0 && n >= 60<<10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stdout pipe never filled (%d bytes)", n)
		}
		time.Sleep(10 * time.Millisecond) // polling the pipe level, bounded
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the sidecar did not exit while its host was not reading")
	}
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestShutdown_ExitRightBehindShutdownWaitsForIt: `exit` sent in the same
// write as `shutdown` (as a host piping frames does) does not cut the
// shutdown short: the shutdown answer with a complete proof is written and
// the exit status is 0 (docs/protocol.md, lifecycle).
func TestShutdown_ExitRightBehindShutdownWaitsForIt(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	e.open(s, "busy", "normal")
	s.sendRaw([]byte(`{"jsonrpc":"2.0","id":"bye","method":"shutdown"}` + "\n" + `{"jsonrpc":"2.0","method":"exit"}` + "\n"))
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("sidecar did not exit")
	}
	f := s.replies[`"bye"`]
	var res struct {
		Proofs []proof `json:"proofs"`
	}
	if f == nil || f.Error != nil || json.Unmarshal(f.Result, &res) != nil || len(res.Proofs) != 1 || !res.Proofs[0].Complete {
		t.Fatalf("shutdown answer before exit: %+v", f)
	}
	if s.exitErr != nil {
		t.Fatalf("exit status after a complete shutdown: %v, want 0", s.exitErr)
	}
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}
