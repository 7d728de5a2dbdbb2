package e2e

// Admission after the launch: the ACP handshake, and how each way it
// fails, is cancelled or times out ends the provider and closes any
// session it created (docs/rules.md#r5 to #r12).

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestAdmission_HandshakeRejectedAfterSpawnTerminatesProviderWithoutProtocolClose
// (docs/rules.md#r5): session/new fails after the provider was spawned; the
// open fails ACPX_SESSION_ENSURE_FAILED, the provider (the very process that
// ran the agent) is in the complete proof and gone, and since no session
// exists no ACP session/close was sent (protocolClose "skipped").
func TestAdmission_HandshakeRejectedAfterSpawnTerminatesProviderWithoutProtocolClose(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	rec := seedRecordFile(t)
	d := seedWantError(t, "open with a rejecting session/new",
		s.call("session/open", seedOpenParams(e, "rejects", rec, "error-new=no session for you")), -32000, "ACPX_SESSION_ENSURE_FAILED")
	msgs := seedReadAgent(t, rec)
	if len(msgs) == 0 {
		t.Fatalf("the agent never ran")
	}
	if d.Cleanup == nil || !d.Cleanup.Complete || !sameAgent(msgs[0].Pid, d.Cleanup.providerOf()) {
		t.Errorf("data.cleanup %+v: want complete and listing provider %d", d.Cleanup, msgs[0].Pid)
	} else if d.Cleanup.ProtocolClose.Outcome != "skipped" {
		t.Errorf("protocolClose %q, want skipped (no session exists)", d.Cleanup.ProtocolClose.Outcome)
	}
	if n := len(seedRecv(msgs, "session/close")); n != 0 {
		t.Errorf("agent received %d session/close without a session", n)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAdmission_CancelDuringHandshakeClosesLateSession (docs/rules.md#r6):
// `$/cancelRequest` during a blocked session/new rejects the open with the
// cancel reason (-32800 ADMISSION_ABORTED), terminates the provider, and the
// session the agent creates afterwards (it answers when SIGTERM arrives) is
// closed with reason "admission aborted" and reported by cleanup/proof.
func TestAdmission_CancelDuringHandshakeClosesLateSession(t *testing.T) {
	open, _ := seedLateHandshake(t, true)
	if open.Reason != "admission aborted" {
		t.Errorf("open's proof reason %q, want \"admission aborted\"", open.Reason)
	}
}

// TestAdmission_HandshakeTimeoutClosesLateSession (docs/rules.md#r7): a
// session/new that outlives handshakeTimeoutMs (200 ms) fails the open with
// ACPX_SESSION_HANDSHAKE_TIMEOUT; its late completion is closed and reported
// as in docs/rules.md#r6.
func TestAdmission_HandshakeTimeoutClosesLateSession(t *testing.T) {
	seedLateHandshake(t, false)
}

// TestAdmission_IdentityCheckedBeforeAdmission (docs/rules.md#r8): no
// backend session id → ACPX_IDENTITY_INVALID, cleanup reason "identity
// validation failed", provider gone, no record saved; no record id (empty
// sessionKey) → -32602 before anything runs; a missing agent session id
// falls back to the backend id, and a distinct one (_meta.agentSessionId) is
// kept.
func TestAdmission_IdentityCheckedBeforeAdmission(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)

	rec := seedRecordFile(t)
	d := seedWantError(t, "open without a session id", s.call("session/open", seedOpenParams(e, "no-id", rec, "no-session-id")),
		-32000, "ACPX_IDENTITY_INVALID")
	if d.Cleanup == nil || !d.Cleanup.Complete || d.Cleanup.Reason != "identity validation failed" || len(d.Cleanup.Processes) == 0 {
		t.Errorf("data.cleanup %+v: want complete, reason \"identity validation failed\", provider listed", d.Cleanup)
	}
	if _, err := os.Stat(e.recordPath("no-id")); !os.IsNotExist(err) {
		t.Errorf("a record was saved for a session without identity (stat err %v)", err)
	}

	rec = seedRecordFile(t)
	p := seedOpenParams(e, "", rec, "")
	if d := seedWantError(t, "open without a record id", s.call("session/open", p), -32602, ""); d.Field != "sessionKey" {
		t.Errorf("data.field %q, want sessionKey", d.Field)
	}
	if len(seedReadAgent(t, rec)) != 0 {
		t.Errorf("an open without a record id launched the agent")
	}

	rec = seedRecordFile(t)
	plain := seedMustOpen(s, seedOpenParams(e, "plain-id", rec, ""))
	msgs := seedReadAgent(t, rec)
	created := ""
	if news := seedRecv(msgs, "session/new"); len(news) == 1 {
		if r := seedReply(msgs, news[0].Msg.ID); r != nil {
			created = seedSessionIDOf(r.Msg.Result)
		}
	}
	if id := plain.Identity; id.SessionKey != "plain-id" || id.BackendSessionID == "" || id.BackendSessionID != created || id.AgentSessionID != id.BackendSessionID {
		t.Errorf("identity %+v: want record id plain-id, backend = agent = %q", id, created)
	}

	distinct := seedMustOpen(s, seedOpenParams(e, "agent-id", seedRecordFile(t), "agent-session-id=agent-side-8"))
	if id := distinct.Identity; id.AgentSessionID != "agent-side-8" || id.BackendSessionID == "" || id.BackendSessionID == id.AgentSessionID {
		t.Errorf("identity %+v: want backend fa-… and agent agent-side-8", id)
	}
	seedCloseProof(t, s, plain.Session, nil)
	seedCloseProof(t, s, distinct.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAdmission_RecordSaveFailureClosesCreatedSession (docs/rules.md#r9):
// the record path is a directory, so the save fails; the open fails
// STORE_UNAVAILABLE and the session the agent created is closed with that
// identity (ACP session/close naming it, protocolClose ok), provider gone.
func TestAdmission_RecordSaveFailureClosesCreatedSession(t *testing.T) {
	e, rec, d := unsavableOpen(t, "")
	if d.Cleanup == nil || !d.Cleanup.Complete || d.Cleanup.ProtocolClose.Outcome != "ok" {
		t.Errorf("data.cleanup %+v: want complete with protocolClose ok", d.Cleanup)
	}
	msgs := seedReadAgent(t, rec)
	created := ""
	if news := seedRecv(msgs, "session/new"); len(news) == 1 {
		if r := seedReply(msgs, news[0].Msg.ID); r != nil {
			created = seedSessionIDOf(r.Msg.Result)
		}
	}
	closes := seedRecv(msgs, "session/close")
	if created == "" || len(closes) != 1 || seedSessionIDOf(closes[0].Msg.Params) != created {
		t.Errorf("created session %q: session/close requests %v, want one naming it", created, closes)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// unsavableOpen opens key "unsavable" (fault agent modes) whose record
// cannot be saved (a directory stands where the record file goes), and
// returns the failed open's error data and the agent's record file.
func unsavableOpen(t *testing.T, modes string) (*faultEnv, string, seedErr) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	if err := os.MkdirAll(e.recordPath("unsavable"), 0o700); err != nil {
		t.Fatal(err)
	}
	rec := seedRecordFile(t)
	d := seedWantError(t, "open whose record save fails", s.call("session/open", seedOpenParams(e, "unsavable", rec, modes)),
		-32000, "STORE_UNAVAILABLE")
	return e, rec, d
}

// TestAdmission_RecoveredSessionHandshakeFailureClosesRecoveredIdentity
// (docs/rules.md#r10): a record exists, the reopen loads it (session/load
// with the recorded id) and the agent refuses; the open fails
// ACPX_SESSION_ENSURE_FAILED, the recovered session is closed by ACP
// session/close with the recovered id, the cleanup reason is "session
// handshake failed", and the record file is byte-for-byte unchanged (nothing
// saved).
func TestAdmission_RecoveredSessionHandshakeFailureClosesRecoveredIdentity(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	agentState := agentWritableDir(t)
	p := withHostHome(e.openParams("recovered", ""))
	p["command"] = map[string]any{"path": faultBin, "args": []string{"--mode", "normal", "--state-dir", agentState}}
	first := seedMustOpen(s, p)
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": first.Session, "requestId": "t1", "prompt": "hi"}, &res)
	seedCloseProof(t, s, first.Session, nil)
	before, err := os.ReadFile(e.recordPath("recovered"))
	if err != nil {
		t.Fatal(err)
	}

	rec := seedRecordFile(t) // this agent has no state dir: session/load fails
	d := seedWantError(t, "reopen whose session/load fails", s.call("session/open", seedOpenParams(e, "recovered", rec, "")),
		-32000, "ACPX_SESSION_ENSURE_FAILED")
	if d.Cleanup == nil || !d.Cleanup.Complete || d.Cleanup.Reason != "session handshake failed" || d.Cleanup.ProtocolClose.Outcome != "ok" {
		t.Errorf("data.cleanup %+v: want complete, reason \"session handshake failed\", protocolClose ok", d.Cleanup)
	}
	msgs := seedReadAgent(t, rec)
	loads, closes := seedRecv(msgs, "session/load"), seedRecv(msgs, "session/close")
	if len(loads) != 1 || seedSessionIDOf(loads[0].Msg.Params) != first.Identity.BackendSessionID {
		t.Errorf("session/load requests %v, want one for %s", loads, first.Identity.BackendSessionID)
	}
	if len(closes) != 1 || seedSessionIDOf(closes[0].Msg.Params) != first.Identity.BackendSessionID {
		t.Errorf("session/close requests %v, want one with the recovered id %s", closes, first.Identity.BackendSessionID)
	}
	if n := len(seedRecv(msgs, "session/new")); n != 0 {
		t.Errorf("a failed recovery fell back to session/new (%d)", n)
	}
	after, err := os.ReadFile(e.recordPath("recovered"))
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the record changed after a failed recovery (err %v)", err)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAdmission_StalledCloseBoundedAndErrorsAggregated (docs/rules.md#r11):
// the handshake fails after a session exists (requested model unavailable)
// and the agent never answers session/close: the close is bounded by
// --close-timeout-ms (outcome "timeout", one attempt), the provider is then
// terminated (proof complete), and the open's error aggregates both:
// data.causes [MODEL_UNAVAILABLE, PROTOCOL_CLOSE_TIMEOUT] and a message
// saying the handshake and its cleanup failed.
func TestAdmission_StalledCloseBoundedAndErrorsAggregated(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	rec := seedRecordFile(t)
	p := seedOpenParams(e, "stalled-close", rec, "hang-close")
	p["model"] = "no-such-model"
	d := seedWantError(t, "open with an unavailable model and a stalled close", s.call("session/open", p), -32000, "MODEL_UNAVAILABLE")
	if d.Cleanup == nil || !d.Cleanup.Complete || d.Cleanup.ProtocolClose.Outcome != "timeout" || len(d.Cleanup.Processes) == 0 {
		t.Fatalf("data.cleanup %+v: want complete, protocolClose timeout, provider listed", d.Cleanup)
	}
	if len(d.Causes) != 2 || d.Causes[0].Code != "MODEL_UNAVAILABLE" || d.Causes[1].Code != "PROTOCOL_CLOSE_TIMEOUT" {
		t.Errorf("data.causes %+v, want [MODEL_UNAVAILABLE PROTOCOL_CLOSE_TIMEOUT]", d.Causes)
	}
	if !strings.Contains(d.Message, "handshake and") || !strings.Contains(d.Message, "cleanup failed") || !strings.Contains(d.Message, "no-such-model") {
		t.Errorf("message %q does not aggregate the handshake and cleanup failures", d.Message)
	}
	if n := len(seedRecv(seedReadAgent(t, rec), "session/close")); n != 1 {
		t.Errorf("agent received %d session/close, want exactly 1 (a timed-out close is never retried)", n)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAdmission_FailedHandshakeErrorsAggregatedInOrder (docs/rules.md#r12):
// the open's data.causes are the handshake error first, then the cleanup's
// errors exactly in proof order: the protocol-close timeout, each
// signal-delivery error (SIGNAL_DELIVERY_FAILED, one per `signals[].error`),
// then "provider did not exit after SIGKILL" (PROVIDER_KILL_TIMEOUT). The
// last is provoked for real: a provider that ignores SIGTERM and needs
// milliseconds to exit after SIGKILL, with --kill-grace-ms 1. A failed
// signal delivery cannot be provoked here (the sidecar is root and signals
// its own live tree through pidfds/cgroup.kill), so the test asserts that
// any present sit between the close error and the kill timeout and match the
// failed signals. The retained cleanup then proves the tree gone.
func TestAdmission_FailedHandshakeErrorsAggregatedInOrder(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedShortGraceArgs(e)...)
	s.initialize(false)
	p := seedOpenParams(e, "aggregate", seedRecordFile(t), "hang-close,"+seedHogModes)
	p["model"] = "no-such-model"
	d := seedWantError(t, "open failing handshake, close and kill", s.call("session/open", p), -32000, "MODEL_UNAVAILABLE")
	if d.Cleanup == nil {
		t.Fatalf("no data.cleanup")
	}
	if len(d.Causes) < 3 || d.Causes[0].Code != "MODEL_UNAVAILABLE" || !strings.Contains(d.Causes[0].Message, "no-such-model") {
		t.Fatalf("data.causes %+v: want the handshake error first, then the cleanup errors", d.Causes)
	}
	if got, want := fmt.Sprint(d.Causes[1:]), fmt.Sprint(d.Cleanup.Errors); got != want {
		t.Errorf("data.causes after the handshake error %s, want the proof's errors in order %s", got, want)
	}
	codes := d.Cleanup.errorCodes()
	last := codes[len(codes)-1]
	if codes[0] != "PROTOCOL_CLOSE_TIMEOUT" || last != "PROVIDER_KILL_TIMEOUT" {
		t.Errorf("cleanup error codes %v: want PROTOCOL_CLOSE_TIMEOUT first and PROVIDER_KILL_TIMEOUT last", codes)
	}
	if !strings.Contains(d.Causes[len(d.Causes)-1].Message, "did not exit after SIGKILL") {
		t.Errorf("last cause %+v, want \"did not exit after SIGKILL\"", d.Causes[len(d.Causes)-1])
	}
	failedSignals, deliveryErrors := 0, 0
	for _, sg := range d.Cleanup.Signals {
		if sg.Error != "" {
			failedSignals++
		}
	}
	for _, c := range codes[1 : len(codes)-1] {
		if c != "SIGNAL_DELIVERY_FAILED" {
			t.Errorf("cleanup error %q between the close timeout and the kill timeout; only signal-delivery errors belong there (%v)", c, codes)
		}
		deliveryErrors++
	}
	if failedSignals > 0 && deliveryErrors == 0 {
		t.Errorf("%d signals failed but no SIGNAL_DELIVERY_FAILED cause is reported", failedSignals)
	}
	if d.Cleanup.Complete {
		t.Errorf("a proof with PROVIDER_KILL_TIMEOUT claims complete: %+v", d.Cleanup)
	}
	final := seedWaitProof(s, func(pr seedProof) bool { return pr.Session == d.Cleanup.Session && pr.Complete })
	if !final.Verified.TreeEmpty {
		t.Errorf("final proof %+v does not verify the tree empty", final)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestOpen_CancelRequestAbortsAdmission: `$/cancelRequest` for a pending
// session/open fails it with -32800 ADMISSION_ABORTED after its cleanup,
// whose proof (data.cleanup) is complete (docs/protocol.md, $/cancelRequest
// and Error model).
func TestOpen_CancelRequestAbortsAdmission(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("abort", "hang-new")
	p["handshakeTimeoutMs"] = 60000
	id := s.start("session/open", p)
	waitMarked(t, e.mark, 20*time.Second) // the provider is launched and hanging
	s.cancelRequest(id)
	d := wantError(t, "open cancelled by $/cancelRequest", s.await(id, 20*time.Second), -32800, "ADMISSION_ABORTED")
	if d.Cleanup == nil || !d.Cleanup.Complete {
		t.Errorf("data.cleanup missing or incomplete: %+v", d.Cleanup)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	// The aborted admission may stay listed as closed/dead, never as live.
	for _, l := range listSessions(s) {
		if st := l["state"]; st != "closed" && st != "dead" {
			t.Errorf("session/list after an aborted open lists a live entry: %v", l)
		}
	}
}

// TestOpen_HandshakeTimeoutReapsProvider: an agent that never answers
// session/new fails the open after handshakeTimeoutMs with
// ACPX_SESSION_HANDSHAKE_TIMEOUT and a complete data.cleanup, and nothing it
// launched survives (docs/protocol.md, Error model; session/open
// handshakeTimeoutMs).
func TestOpen_HandshakeTimeoutReapsProvider(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("timeout", "hang-new")
	p["handshakeTimeoutMs"] = 200
	d := wantError(t, "open with a hanging session/new", s.call("session/open", p), -32000, "ACPX_SESSION_HANDSHAKE_TIMEOUT")
	if d.Cleanup == nil || !d.Cleanup.Complete || len(d.Cleanup.Processes) == 0 {
		t.Errorf("data.cleanup missing, incomplete or listing no process: %+v", d.Cleanup)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
