package e2e

import (
	"encoding/json"
	"testing"
	"time"
)

// TestAttack_HungAgentFreezesNothing: an agent floods
// session/request_permission and never reads its stdin again (issue 18,
// "one agent freezes the whole sidecar"). Every ask is still decided and
// audited (the answers wait in its bounded outbox, the actor never blocks
// on its pipe); session/list, session/status of both sessions and
// sidecar/stats are answered within their bound; a neighbour session
// keeps streaming; and the hung session's close goes to termination within
// the close bounds with a complete proof (docs/protocol.md §20).
func TestAttack_HungAgentFreezesNothing(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false) // asks are decided as nonInteractivePermissions says: one answer each, at once
	const asks = 5000   // ~0.5 MB of answers: far more than a pipe holds
	hung := openAttacker(s, e, "hung", "deaf,ask-flood=5000")
	nb := startNeighbour(t, s, e, 300)
	s.start("session/prompt", map[string]any{"session": hung.Session, "requestId": "h1", "prompt": "go"})
	// The old actor wrote each answer to the pipe itself and stopped at
	// the first full pipe: here every ask is decided.
	s.waitFor(60*time.Second, "every ask of the hung agent decided", countNotes(s, "session/permission", asks, ofSession(hung.Session)))

	// Reads of session state: answered within the state-read bound (1 s)
	// plus a generous margin for a loaded machine.
	const readBound = 10 * time.Second
	list := s.start("session/list", map[string]any{})
	st := s.start("session/status", map[string]any{"session": hung.Session})
	nst := s.start("session/status", map[string]any{"session": nb.session})
	stats := s.start("sidecar/stats", map[string]any{})
	for _, id := range []string{list, st, nst, stats} {
		if f := s.await(id, readBound); f.Error != nil {
			t.Fatalf("state read answered with an error: %+v", f.Error)
		}
	}
	var ls struct {
		Sessions []struct {
			Session string `json:"session"`
			State   string `json:"state"`
		} `json:"sessions"`
	}
	_ = json.Unmarshal(s.await(list, 0).Result, &ls)
	states := map[string]string{}
	for _, e := range ls.Sessions {
		states[e.Session] = e.State
	}
	if states[hung.Session] != "turn" {
		t.Errorf("session/list: hung session in state %q, want turn", states[hung.Session])
	}
	nb.check(t, 60*time.Second)

	// The close: ACP session/close cannot reach an agent that reads
	// nothing; the tree is ended within closeTimeoutMs + termGraceMs +
	// killGraceMs (2 s each by default), plus a margin.
	start := time.Now()
	f := s.await(s.start("session/close", map[string]any{"session": hung.Session, "reason": "hung"}), 30*time.Second)
	took := time.Since(start)
	if f.Error != nil {
		t.Fatalf("close of the hung session: %+v", f.Error)
	}
	var cr struct {
		Proof proof `json:"proof"`
	}
	_ = json.Unmarshal(f.Result, &cr)
	if !cr.Proof.Complete {
		t.Fatalf("close proof not complete: %+v", cr.Proof)
	}
	if o := cr.Proof.ProtocolClose.Outcome; o != "skipped" && o != "timeout" {
		t.Errorf("protocolClose %q: an agent that reads nothing cannot have answered session/close", o)
	}
	if took > 6*time.Second+10*time.Second {
		t.Errorf("close of a hung agent took %v, past the close bounds (6 s) and a 10 s margin", took)
	}
	closeClean(t, s, nb.session, e.mark, e.work)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}
