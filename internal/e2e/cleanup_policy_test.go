package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// closeTraffic is the agent's session/close traffic in the order its
// record shows it: "close" for each request received, "error" / "ok" for
// each answer sent.
func closeTraffic(msgs []seedAgentMsg) string {
	var seq []string
	for _, m := range msgs {
		switch {
		case m.Dir == "recv" && m.Msg.Method == "session/close":
			seq = append(seq, "close")
		case m.Dir == "sent" && m.Msg.Method == "" && m.Msg.Error != nil && strings.Contains(m.Msg.Error.Message, "close failed"):
			seq = append(seq, "error")
		case m.Dir == "sent" && m.Msg.Method == "" && string(m.Msg.Result) == "{}":
			seq = append(seq, "ok")
		}
	}
	return strings.Join(seq, ",")
}

func causeCodes(cs []seedCause) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Code
	}
	return out
}

// lateSessionOpen opens with an agent that creates its session only once
// SIGTERM arrives (new-on-term) plus modes, cancels the open once the
// agent has received session/new (so a slow initialize on a loaded
// machine cannot be what is given up), and returns the failed open's
// error data and the late session's cleanup/proof. The term grace is
// long, so the late close's retries run before the tree is killed.
func lateSessionOpen(t *testing.T, modes string) (*faultEnv, string, *seedErr, seedProof) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e, "--term-grace-ms", "4000")...)
	s.initialize(false)
	rec := seedRecordFile(t)
	p := seedOpenParams(e, "late", rec, "new-on-term,"+modes)
	p["handshakeTimeoutMs"] = 60000
	id := s.start("session/open", p)
	seedWaitAgent(t, rec, "session/new received", func(m []seedAgentMsg) bool { return len(seedRecv(m, "session/new")) == 1 })
	s.cancelRequest(id)
	d := seedWantError(t, "open cancelled during its handshake", s.await(id, 30*time.Second), -32800, "ADMISSION_ABORTED")
	if d.Cleanup == nil || !d.Cleanup.Complete {
		t.Fatalf("data.cleanup %+v: want complete", d.Cleanup)
	}
	late := seedWaitProof(s, func(pr seedProof) bool { return pr.Session == d.Cleanup.Session && pr.CleanupID != d.Cleanup.CleanupID })
	return e, rec, &d, late
}

// TestCleanup_LateSessionCloseRetriedBeyondAnyCount (docs/rules.md#r20): a
// session the agent creates after its admission was given up is a
// retained target; its close fails four times (more than the live
// close's budget would allow, were it counted) and the fifth succeeds,
// one attempt in flight at a time. The late proof says ok and lists the
// four failures in order; the failed open's data.causes carry the
// open's own error (ADMISSION_ABORTED), then every cleanup error in
// order, the four close failures last.
func TestCleanup_LateSessionCloseRetriedBeyondAnyCount(t *testing.T) {
	e, rec, d, late := lateSessionOpen(t, "error-close=4")
	if late.ProtocolClose.Outcome != "ok" || !late.Complete || late.Reason != "admission aborted" {
		t.Errorf("late proof protocolClose %+v complete %v reason %q", late.ProtocolClose, late.Complete, late.Reason)
	}
	fails := []string{"PROTOCOL_CLOSE_FAILED", "PROTOCOL_CLOSE_FAILED", "PROTOCOL_CLOSE_FAILED", "PROTOCOL_CLOSE_FAILED"}
	if got := late.errorCodes(); len(got) < 4 || !slices.Equal(got[:4], fails) {
		t.Errorf("late proof errors %v, want the four close failures first", got)
	}
	if got := closeTraffic(seedReadAgent(t, rec)); got != "close,error,close,error,close,error,close,error,close,ok" {
		t.Errorf("session/close traffic %s, want four failures then ok, one at a time", got)
	}
	got := causeCodes(d.Causes)
	if len(got) < 5 || got[0] != "ADMISSION_ABORTED" || !slices.Equal(got[len(got)-4:], fails) {
		t.Errorf("failed open's data.causes %v: want the handshake error, the cleanup's errors, then the four close failures", got)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestCleanup_TimedOutCloseThatLaterFailsIsRetried (docs/rules.md#r16): the
// late session's first close outlives --close-timeout-ms (300 ms) and is
// answered with an error at 900 ms; it stayed the only close until then,
// and a retry follows its failure and succeeds. The late proof lists the
// timeout and the failure, in that order, and says ok.
func TestCleanup_TimedOutCloseThatLaterFailsIsRetried(t *testing.T) {
	e, rec, d, late := lateSessionOpen(t, "slow-error-close=900")
	if late.ProtocolClose.Outcome != "ok" || !late.Complete {
		t.Errorf("late proof protocolClose %+v complete %v, want ok", late.ProtocolClose, late.Complete)
	}
	if got := late.errorCodes(); len(got) < 2 || !slices.Equal(got[:2], []string{"PROTOCOL_CLOSE_TIMEOUT", "PROTOCOL_CLOSE_FAILED"}) {
		t.Errorf("late proof errors %v, want the timeout, then the late failure", got)
	}
	if got := closeTraffic(seedReadAgent(t, rec)); got != "close,error,close,ok" {
		t.Errorf("session/close traffic %s, want close,error,close,ok (the retry only after the timed-out close failed)", got)
	}
	if got := causeCodes(d.Causes); len(got) < 3 || !slices.Equal(got[len(got)-2:], []string{"PROTOCOL_CLOSE_TIMEOUT", "PROTOCOL_CLOSE_FAILED"}) {
		t.Errorf("failed open's data.causes %v: want the late close's timeout and failure last", got)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestCleanup_LateCloseThatRanOutItsTimeIsTimeout (docs/rules.md#r16,
// #r29; issue 33): the late session's close is never answered; it is
// reported timed out after --close-timeout-ms and stays the target's only
// close, and when the tree is then ended (the provider gone, the
// connection closed) the close's outcome stays timeout — the agent never
// answered it with an error — and no close failure is listed.
func TestCleanup_LateCloseThatRanOutItsTimeIsTimeout(t *testing.T) {
	e, _, _, late := lateSessionOpen(t, "hang-close")
	if late.ProtocolClose.Outcome != "timeout" || !late.Complete {
		t.Errorf("late proof protocolClose %+v complete %v, want timeout, complete", late.ProtocolClose, late.Complete)
	}
	got := late.errorCodes()
	if len(got) == 0 || got[0] != "PROTOCOL_CLOSE_TIMEOUT" || slices.Contains(got, "PROTOCOL_CLOSE_FAILED") {
		t.Errorf("late proof errors %v, want the timeout and no close failure", got)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAdmission_FailedOpenCarriesEveryCleanupError (docs/rules.md#r11,
// #r12): an open whose record cannot be saved closes the session it
// created; that close fails twice and then succeeds. The open's
// data.cleanup says protocolClose ok and still lists both failures, and
// data.causes is the store error, then both failures, in order.
func TestAdmission_FailedOpenCarriesEveryCleanupError(t *testing.T) {
	e, rec, d := unsavableOpen(t, "error-close=2")
	fails := []string{"PROTOCOL_CLOSE_FAILED", "PROTOCOL_CLOSE_FAILED"}
	if d.Cleanup == nil || !d.Cleanup.Complete || d.Cleanup.ProtocolClose.Outcome != "ok" || !slices.Equal(d.Cleanup.errorCodes(), fails) {
		t.Fatalf("data.cleanup %+v: want complete, protocolClose ok, both failures kept", d.Cleanup)
	}
	if got := causeCodes(d.Causes); !slices.Equal(got, append([]string{"STORE_UNAVAILABLE"}, fails...)) {
		t.Errorf("data.causes %v, want STORE_UNAVAILABLE then both close failures", got)
	}
	if got := closeTraffic(seedReadAgent(t, rec)); got != "close,error,close,error,close,ok" {
		t.Errorf("session/close traffic %s", got)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
