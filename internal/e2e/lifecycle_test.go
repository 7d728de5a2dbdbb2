package e2e

import (
	"encoding/json"
	"testing"
	"time"
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
