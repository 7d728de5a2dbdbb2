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
