package e2e

// Owning cleanup: retained cleanups, protocol-close attempts, one owner
// per record id, and termination beyond the protocol-close budget
// (docs/rules.md#r15 to #r18, #r20, #r29).

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCleanup_RetainedUntilTreeProvenGone (docs/rules.md#r15): a provider
// whose exit outlasts --kill-grace-ms 1 makes the first cleanup fail. For a
// failed open the error reports both the original error and the cleanup
// error (data.causes), the proof is incomplete, and the retained cleanup
// keeps retrying until the tree is observed empty: cleanup/proof with the
// same cleanupId, complete, more than one attempt. For a close the reply is
// CLEANUP_INCOMPLETE with that proof, the final proof follows as
// cleanup/proof, and a later close returns it.
func TestCleanup_RetainedUntilTreeProvenGone(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedShortGraceArgs(e)...)
	s.initialize(false)

	d := seedWantError(t, "open rejected by the agent, slow to die", s.call("session/open",
		seedOpenParams(e, "retained-open", seedRecordFile(t), "error-new=refused,"+seedHogModes)), -32000, "ACPX_SESSION_ENSURE_FAILED")
	if d.Cleanup == nil || d.Cleanup.Complete {
		t.Fatalf("data.cleanup %+v: want an incomplete proof", d.Cleanup)
	}
	codes := []string{}
	for _, c := range d.Causes {
		codes = append(codes, c.Code)
	}
	if len(codes) < 2 || codes[0] != "ACPX_SESSION_ENSURE_FAILED" || codes[len(codes)-1] != "PROVIDER_KILL_TIMEOUT" {
		t.Errorf("data.causes %v: want the original error, then the cleanup error", codes)
	}
	final := seedWaitProof(s, func(pr seedProof) bool { return pr.Session == d.Cleanup.Session && pr.Complete })
	if final.CleanupID != d.Cleanup.CleanupID || final.Attempts < 2 || !final.Verified.TreeEmpty {
		t.Errorf("final proof cleanupId %q attempts %d verified %+v; want %q, >1, tree empty", final.CleanupID, final.Attempts, final.Verified, d.Cleanup.CleanupID)
	}

	o := seedMustOpen(s, e.openParams("retained-close", seedHogModes))
	cd := seedWantError(t, "close of a slow-to-die provider", seedClose(s, o.Session, nil), -32000, "CLEANUP_INCOMPLETE")
	if cd.Proof == nil || cd.Proof.Complete {
		t.Fatalf("data.proof %+v: want an incomplete proof", cd.Proof)
	}
	final = seedWaitProof(s, func(pr seedProof) bool { return pr.Session == o.Session && pr.Complete })
	if final.CleanupID != cd.Proof.CleanupID || final.Attempts < 2 {
		t.Errorf("final close proof cleanupId %q attempts %d; want %q, >1", final.CleanupID, final.Attempts, cd.Proof.CleanupID)
	}
	if again := seedCloseProof(t, s, o.Session, nil); again.CleanupID != final.CleanupID || !again.Complete {
		t.Errorf("close after the retained cleanup finished: %+v, want the final proof %s", again, final.CleanupID)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestCleanup_OneProtocolCloseInFlightPerTarget (docs/rules.md#r16): a close
// that outlives --close-timeout-ms stays the target's only attempt (the
// agent receives exactly one session/close; protocolClose "timeout"); a
// close answered with an error is retried only after that answer — the
// agent's record shows strictly alternating session/close request and answer
// — until one succeeds.
func TestCleanup_OneProtocolCloseInFlightPerTarget(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)

	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "hung-close", rec, "hang-close"))
	pr := seedCloseProof(t, s, o.Session, nil)
	if pr.ProtocolClose.Outcome != "timeout" || !pr.Complete {
		t.Errorf("proof protocolClose %+v complete %v, want timeout and complete", pr.ProtocolClose, pr.Complete)
	}
	if n := len(seedRecv(seedReadAgent(t, rec), "session/close")); n != 1 {
		t.Errorf("agent received %d session/close after a timed-out close, want 1", n)
	}

	rec = seedRecordFile(t)
	o = seedMustOpen(s, seedOpenParams(e, "flaky-close", rec, "error-close=2"))
	pr = seedCloseProof(t, s, o.Session, nil)
	if pr.ProtocolClose.Outcome != "ok" || !pr.Complete {
		t.Errorf("proof protocolClose %+v complete %v, want ok after retries", pr.ProtocolClose, pr.Complete)
	}
	if got := closeTraffic(seedReadAgent(t, rec)); got != "close,error,close,error,close,ok" {
		t.Errorf("session/close traffic %s, want close,error,close,error,close,ok (one attempt in flight at a time)", got)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestCleanup_OneCleanupOwnerPerRecordId (docs/rules.md#r17). The sidecar
// keys cleanup ownership by sessionKey (= record id) and holds the key until
// that cleanup is proven, so two cleanups of one record cannot run side by
// side. Observable consequences: (1) while a retained cleanup of key K runs,
// an open of K is refused SESSION_KEY_IN_USE and launches nothing, and once
// the final proof is out K opens again; (2) a late handshake's cleanup and
// the admission's cleanup of the same record share one tree termination
// (identical signals and processes in both proofs).
func TestCleanup_OneCleanupOwnerPerRecordId(t *testing.T) {
	t.Run("key-held-while-cleanup-retained", func(t *testing.T) {
		e := newFaultEnv(t)
		s := startSidecar(t, seedShortGraceArgs(e)...)
		s.initialize(false)
		rec := seedRecordFile(t)
		d := seedWantError(t, "open with a retained cleanup", s.call("session/open",
			seedOpenParams(e, "K", rec, "error-new=refused,"+seedHogModes)), -32000, "ACPX_SESSION_ENSURE_FAILED")
		if d.Cleanup == nil || d.Cleanup.Complete {
			t.Fatalf("data.cleanup %+v: want incomplete (retained)", d.Cleanup)
		}
		again := seedOpenParams(e, "K", rec, "")
		id := s.start("session/open", again)
		f := s.await(id, 30*time.Second)
		replyAt := seedFrameIndex(s, func(fr *frame) bool { return string(fr.ID) == id && fr.Method == "" })
		proofAt := seedFrameIndex(s, func(fr *frame) bool {
			var n struct {
				Proof seedProof `json:"proof"`
			}
			return fr.Method == "cleanup/proof" && json.Unmarshal(fr.Params, &n) == nil && n.Proof.Session == d.Cleanup.Session && n.Proof.Complete
		})
		switch {
		case f.Error != nil:
			seedWantError(t, "open of a key whose cleanup is retained", f, -32000, "SESSION_KEY_IN_USE")
			if proofAt >= 0 && proofAt < replyAt {
				t.Errorf("SESSION_KEY_IN_USE after the cleanup of that key was already proven")
			}
			starts := 0
			for _, m := range seedReadAgent(t, rec) {
				if m.Dir == "start" {
					starts++
				}
			}
			if starts != 1 {
				t.Errorf("the refused open launched the agent (%d starts)", starts)
			}
		case proofAt < 0 || proofAt > replyAt:
			t.Errorf("an open of K succeeded while K's previous cleanup was still retained (cleanup/proof at frame %d, reply at %d)", proofAt, replyAt)
		default:
			t.Logf("the retained cleanup was proven before the second open arrived; the key-in-use window was not hit")
			seedCloseEventually(t, s, decodeResult[seedOpen](t, "reopen", f).Session)
		}
		seedWaitProof(s, func(pr seedProof) bool { return pr.Session == d.Cleanup.Session && pr.Complete })
		if f.Error != nil {
			o := seedMustOpen(s, e.openParams("K", ""))
			seedCloseEventually(t, s, o.Session)
		}
		waitNoMarked(t, e.mark, e.work, 10*time.Second)
	})
	t.Run("late-handshake-shares-the-record-cleanup", func(t *testing.T) {
		open, late := seedLateHandshake(t, false)
		if fmt.Sprint(open.Signals) != fmt.Sprint(late.Signals) || fmt.Sprint(open.Processes) != fmt.Sprint(late.Processes) {
			t.Errorf("late-handshake proof has its own termination:\n open %+v %+v\n late %+v %+v", open.Signals, open.Processes, late.Signals, late.Processes)
		}
		if open.SessionKey != late.SessionKey || open.Session != late.Session {
			t.Errorf("proofs name different records: %q/%q vs %q/%q", open.SessionKey, open.Session, late.SessionKey, late.Session)
		}
	})
}

// TestCleanup_SessionKeyIsTheRecordIdentityWithBothIdsKept
// (docs/rules.md#r18): a session fallback is promoted into the later durable
// record lifecycle. In the sidecar a session is known by its sessionKey from
// the first frame, and that key IS the record id, so "promotion" is
// structural; what must hold is that the merged identity keeps both ids: the
// open result, session/status, the record on disk (acpx_record_id,
// acp_session_id, agent_session_id) and the close proof all name the same
// record id, backend id and distinct agent id, also after close.
func TestCleanup_SessionKeyIsTheRecordIdentityWithBothIdsKept(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := seedMustOpen(s, e.openParams("promoted", "agent-session-id=agent-18"))
	id := o.Identity
	if id.SessionKey != "promoted" || id.AgentSessionID != "agent-18" || id.BackendSessionID == "" {
		t.Fatalf("identity %+v", id)
	}
	var st struct {
		Identity struct {
			SessionKey       string `json:"acpxRecordId"`
			BackendSessionID string `json:"backendSessionId"`
			AgentSessionID   string `json:"agentSessionId"`
		} `json:"identity"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.Identity != id {
		t.Errorf("status identity %+v, open identity %+v", st.Identity, id)
	}
	check := func(when string) {
		rec := seedReadJSON(t, e.recordPath("promoted"))
		if rec["acpx_record_id"] != "promoted" || rec["acp_session_id"] != id.BackendSessionID || rec["agent_session_id"] != "agent-18" {
			t.Errorf("record %s: acpx_record_id %v acp_session_id %v agent_session_id %v", when, rec["acpx_record_id"], rec["acp_session_id"], rec["agent_session_id"])
		}
	}
	check("while open")
	if pr := seedCloseProof(t, s, o.Session, nil); pr.SessionKey != "promoted" || pr.Session != o.Session || !pr.Complete {
		t.Errorf("close proof sessionKey %q session %q complete %v", pr.SessionKey, pr.Session, pr.Complete)
	}
	check("after close")
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestCleanup_ProcessTerminationOutlivesProtocolCloseBudget
// (docs/rules.md#r20): protocol-close retries stop at the attempt budget
// (default 4: the agent receives exactly four session/close, the proof says
// "error" and lists PROTOCOL_CLOSE_FAILED), but process termination does
// not: with --protocol-close-attempts 1 and a provider slow to die, the
// close's proof is incomplete, and termination is retried until the tree is
// gone (final cleanup/proof complete with attempts > 1), still reporting the
// terminal protocol error.
func TestCleanup_ProcessTerminationOutlivesProtocolCloseBudget(t *testing.T) {
	t.Run("protocol-close-budget", func(t *testing.T) {
		e := newFaultEnv(t)
		s := startSidecar(t, seedArgs(e)...)
		s.initialize(false)
		rec := seedRecordFile(t)
		o := seedMustOpen(s, seedOpenParams(e, "close-always-fails", rec, "error-close=100"))
		pr := seedCloseProof(t, s, o.Session, nil)
		if pr.ProtocolClose.Outcome != "error" || !pr.Complete || !strings.Contains(fmt.Sprint(pr.errorCodes()), "PROTOCOL_CLOSE_FAILED") {
			t.Errorf("proof protocolClose %+v complete %v errors %v", pr.ProtocolClose, pr.Complete, pr.errorCodes())
		}
		if n := len(seedRecv(seedReadAgent(t, rec), "session/close")); n != 4 {
			t.Errorf("agent received %d session/close, want the budget of 4", n)
		}
		waitNoMarked(t, e.mark, e.work, 10*time.Second)
	})
	t.Run("termination-beyond-budget", func(t *testing.T) {
		e := newFaultEnv(t)
		s := startSidecar(t, seedShortGraceArgs(e, "--protocol-close-attempts", "1")...)
		s.initialize(false)
		rec := seedRecordFile(t)
		o := seedMustOpen(s, seedOpenParams(e, "beyond-budget", rec, "error-close=100,"+seedHogModes))
		d := seedWantError(t, "close of a slow-to-die provider", seedClose(s, o.Session, nil), -32000, "CLEANUP_INCOMPLETE")
		if d.Proof == nil || d.Proof.Complete || d.Proof.Attempts != 1 {
			t.Fatalf("data.proof %+v: want incomplete after 1 attempt", d.Proof)
		}
		final := seedWaitProof(s, func(pr seedProof) bool { return pr.Session == o.Session && pr.Complete })
		if final.Attempts <= 1 || !strings.Contains(fmt.Sprint(final.errorCodes()), "PROTOCOL_CLOSE_FAILED") || final.ProtocolClose.Outcome != "error" {
			t.Errorf("final proof attempts %d errors %v protocolClose %+v: want >1 attempts and the protocol error kept",
				final.Attempts, final.errorCodes(), final.ProtocolClose)
		}
		if n := len(seedRecv(seedReadAgent(t, rec), "session/close")); n != 1 {
			t.Errorf("agent received %d session/close with a budget of 1", n)
		}
		waitNoMarked(t, e.mark, e.work, 10*time.Second)
	})
}

// TestCleanup_LateCloseFailureAfterTimeoutRevivesNothing
// (docs/rules.md#r29). In the sidecar a protocol close that outlives
// --close-timeout-ms is followed by terminating the tree, so the close's
// late failure (the agent answers session/close with an error once SIGTERM
// arrives — its record shows it did) finds nothing to revive: the proof is
// complete, a second close returns the same proof, no cleanup/proof is ever
// sent for the session (checked after shutdown, which waits for every
// retained cleanup), shutdown repeats no proof for it, and the sidecar exits
// 0.
func TestCleanup_LateCloseFailureAfterTimeoutRevivesNothing(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "late-close-failure", rec, "close-error-on-term"))
	pr := seedCloseProof(t, s, o.Session, nil)
	if pr.ProtocolClose.Outcome != "timeout" || !pr.Complete {
		t.Fatalf("proof protocolClose %+v complete %v, want timeout and complete", pr.ProtocolClose, pr.Complete)
	}
	msgs := seedReadAgent(t, rec)
	closes := seedRecv(msgs, "session/close")
	if len(closes) != 1 {
		t.Fatalf("agent received %d session/close, want 1", len(closes))
	}
	if r := seedReply(msgs, closes[0].Msg.ID); r == nil || r.Msg.Error == nil {
		t.Errorf("the agent did not produce the late close failure")
	}
	if again := seedCloseProof(t, s, o.Session, nil); again.CleanupID != pr.CleanupID {
		t.Errorf("second close proof %q, want the first %q", again.CleanupID, pr.CleanupID)
	}
	proofs, status := s.shutdownAndExit()
	for _, p := range proofs {
		if p.Session == o.Session {
			t.Errorf("shutdown repeated a proof for the closed session: %+v", p)
		}
	}
	if status != 0 {
		t.Errorf("exit status %d, want 0", status)
	}
	if n := seedProofNotes(s, o.Session); len(n) != 0 {
		t.Errorf("%d cleanup/proof notifications after a late close failure, want none: %+v", len(n), n)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
