package e2e

// Withdrawn requests (docs/protocol.md §22): the agent's $/cancel_request
// of a request the sidecar put to the host, the host's own
// $/cancel_request, and the sidecar's $/cancel_request to an agent whose
// answer it gave up on.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestWithdraw_AgentWithdrawsPermissionAndElicitation: the fault agent
// withdraws its pending permission ask (permission-withdraw) and its
// pending elicitation (elicit-withdraw) while the host holds them: the
// agent is answered -32800, the host gets $/cancelRequest with the id of
// the sidecar's own request, the withdrawal is audited "withdrawn", and
// the host's late answer changes nothing.
func TestWithdraw_AgentWithdrawsPermissionAndElicitation(t *testing.T) {
	for _, c := range []struct {
		name, modes, method, chunk string
		late                       any
	}{
		{"permission", "permission=execute,permission-withdraw=200", "session/requestPermission", "permission: error -32800",
			map[string]any{"outcome": "selected", "optionId": "allow-once"}},
		{"elicitation", "elicit=form,elicit-withdraw=200", "session/elicitation", "elicit: error -32800",
			map[string]any{"action": "accept", "content": map[string]any{"strategy": "balanced"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newFaultEnv(t)
			s := startSidecar(t, "--state-dir", e.stateDir)
			reqs := elicitHost(s, func(f *frame) any { return nil }) // held: never answered in time
			initElicit(s, map[string]bool{"form": true})
			p := acpCheckedParams(t, e, "withdraw-"+c.name, c.modes)
			p["permissionPolicy"] = map[string]any{"escalate": []string{"execute"}}
			var o openResult
			s.mustCall("session/open", p, &o)
			id := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "ask"})
			f := nextRequest(t, reqs, c.method)
			waitHostCancel(t, s, f.ID)
			res := decodeResult[turnResult](t, "turn", s.await(id, 20*time.Second))
			if res.Status != "completed" {
				t.Errorf("turn %+v", res)
			}
			var got string
			for _, ch := range agentChunks(s, o.Session, "t1") {
				if strings.HasPrefix(ch, "permission: ") || strings.HasPrefix(ch, "elicit: ") {
					got = ch
				}
			}
			if got != c.chunk {
				t.Errorf("agent got %q, want %q", got, c.chunk)
			}
			if c.name == "permission" {
				d := finalDecision(t, s, o.Session, "t1")
				if d.Decision != "withdrawn" || d.Rule != "agent $/cancel_request" {
					t.Errorf("audit %+v, want withdrawn by the agent's $/cancel_request", d)
				}
			} else if n := oneElicitNote(t, s, o.Session); n.Action != "withdrawn" || n.Rule != "agent $/cancel_request" {
				t.Errorf("audit %+v, want withdrawn by the agent's $/cancel_request", n)
			}
			// The late answer: ignored, the session keeps working.
			s.send(map[string]any{"jsonrpc": "2.0", "id": f.ID, "result": c.late})
			st := statusOf(s, o.Session)
			if st.State != "open" {
				t.Errorf("state after the late answer %q, want open", st.State)
			}
			if c.name == "permission" {
				for _, n := range permissionNotes(s, o.Session) {
					if n.Decision == "approved" {
						t.Errorf("the late answer was applied: %+v", n)
					}
				}
			} else if ns := elicitNotes(s, o.Session); len(ns) != 1 {
				t.Errorf("audits %+v after the late answer, want only the withdrawal", ns)
			}
			closeProof(s, o.Session, nil)
			waitNoMarked(t, e.mark, e.work, 10*time.Second)
		})
	}
}

// TestWithdraw_HostCancelRequestACPSpelling: the host's
// `$/cancel_request {"requestId": id}` cancels a running session/prompt
// exactly like `$/cancelRequest {"id": id}`: status "cancelled".
func TestWithdraw_HostCancelRequestACPSpelling(t *testing.T) {
	cancelSlowTurn(t, "$/cancel_request", func(s *sidecar, id string) {
		s.send(map[string]any{"jsonrpc": "2.0", "method": "$/cancel_request", "params": map[string]any{"requestId": json.RawMessage(id)}})
	})
}

// cancelSlowTurn runs a slow turn, cancels its session/prompt request
// (id: its id key) with cancel, and checks the result is status
// "cancelled" (docs/protocol.md §7 $/cancelRequest).
func cancelSlowTurn(t *testing.T, how string, cancel func(s *sidecar, id string)) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	var o openResult
	s.mustCall("session/open", acpCheckedParams(t, e, "cancelreq", "slow-turn=30000"), &o)
	id := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "slow"})
	s.waitTurnUpdate(o.Session, "t1")
	cancel(s, id)
	res := decodeResult[turnResult](t, "turn cancelled by "+how, s.await(id, 20*time.Second))
	if res.Status != "cancelled" || res.RequestID != "t1" {
		t.Errorf("turn result %+v, want status cancelled", res)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestWithdraw_SidecarCancelsWhatItGaveUpOn: a session/close the agent
// never answers is given up after --close-timeout-ms, and the agent is
// sent $/cancel_request naming that close's id.
func TestWithdraw_SidecarCancelsWhatItGaveUpOn(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "gave-up-close", rec, "hang-close,ignore-term"))
	seedCloseProof(t, s, o.Session, nil)
	msgs := seedReadAgent(t, rec)
	closes := seedRecv(msgs, "session/close")
	cancels := seedRecv(msgs, "$/cancel_request")
	if len(closes) != 1 || len(cancels) != 1 {
		t.Fatalf("agent received %d session/close and %d $/cancel_request, want 1 and 1", len(closes), len(cancels))
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(cancels[0].Msg.Params, &p) != nil || string(p.RequestID) != string(closes[0].Msg.ID) {
		t.Errorf("$/cancel_request %s, want requestId %s (the close's)", cancels[0].Msg.Params, closes[0].Msg.ID)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestWithdraw_AgentWithdrawsAnExtensionRequest: the fault agent withdraws
// its `_…` request (ext-withdraw) while the host holds it: the agent is
// answered -32800, the host gets $/cancelRequest with the id of the
// sidecar's own session/extRequest, and the host's late answer changes
// nothing (docs/protocol.md §22: every request the sidecar put to the
// host, extension requests included).
func TestWithdraw_AgentWithdrawsAnExtensionRequest(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	reqs := elicitHost(s, func(f *frame) any { return nil }) // held
	initExt(s, true)
	o := seedMustOpen(s, acpCheckedParams(t, e, "withdraw-ext", "ext-ask=_fa/ask,ext-withdraw=200"))
	id := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "ask"})
	f := nextRequest(t, reqs, "session/extRequest")
	waitHostCancel(t, s, f.ID)
	if r := s.await(id, 20*time.Second); r.Error != nil {
		t.Fatalf("turn: %s", r.Error.Message)
	}
	if got := extChunk(s, o.Session, "t1"); !strings.HasPrefix(got, "ext: error -32800 ") {
		t.Errorf("agent got %q, want -32800", got)
	}
	s.send(map[string]any{"jsonrpc": "2.0", "id": f.ID, "result": map[string]any{"late": true}})
	if st := statusOf(s, o.Session); st.State != "open" {
		t.Errorf("state after the late answer %q, want open", st.State)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestWithdraw_HostToldWhenTheSidecarStopsWaiting: an extension request
// the host holds past its bound (permissionTimeoutMs) is answered -32603
// to the agent and the host gets $/cancelRequest for it, so its handler
// can stop (docs/protocol.md §22; the host had been told nothing; found by
// a fresh-user trial).
func TestWithdraw_HostToldWhenTheSidecarStopsWaiting(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	reqs := elicitHost(s, func(f *frame) any { return nil }) // held
	initExt(s, true)
	p := acpCheckedParams(t, e, "bound-ext", "ext-ask=_fa/ask")
	p["permissionTimeoutMs"] = 300
	o := seedMustOpen(s, p)
	id := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "ask"})
	f := nextRequest(t, reqs, "session/extRequest")
	waitHostCancel(t, s, f.ID)
	if r := s.await(id, 20*time.Second); r.Error != nil {
		t.Fatalf("turn: %s", r.Error.Message)
	}
	if got := extChunk(s, o.Session, "t1"); !strings.HasPrefix(got, "ext: error -32603 ") {
		t.Errorf("agent got %q, want -32603", got)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
