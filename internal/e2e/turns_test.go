package e2e

// Turns (session/prompt): one at a time, unique request ids, cancel,
// update streams, and a provider lost during a turn (docs/protocol.md,
// session/prompt; docs/rules.md#r28).

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTurn_OneActiveTurn: a prompt while another turn of the session runs
// gets -32000 TURN_ACTIVE (docs/protocol.md, session/prompt: one turn per
// session).
func TestTurn_OneActiveTurn(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "one-turn", "slow-turn=3000")
	first := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "slow"})
	s.waitTurnUpdate(o.Session, "t1")
	wantError(t, "second prompt during a turn",
		s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "again"}), -32000, "TURN_ACTIVE")
	res := decodeResult[turnResult](t, "first turn", s.await(first, 30*time.Second))
	if res.Status != "completed" || res.RequestID != "t1" {
		t.Errorf("first turn: %+v", res)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestTurn_DuplicateRequestID: a requestId already used in the session gets
// -32000 DUPLICATE_REQUEST_ID (docs/protocol.md, session/prompt: unique
// within the session).
func TestTurn_DuplicateRequestID(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "dup", "")
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "one"}, &res)
	if res.Status != "completed" {
		t.Fatalf("first turn: %+v", res)
	}
	wantError(t, "prompt reusing requestId t1",
		s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "two"}), -32000, "DUPLICATE_REQUEST_ID")
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "three"}, &res)
	if res.Status != "completed" {
		t.Errorf("turn with a fresh requestId after the rejection: %+v", res)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestTurn_SessionCancelEndsTurnCancelled: session/cancel during a 30 s turn
// answers {cancelled: true} and the turn's result is status "cancelled"
// (docs/protocol.md, session/cancel). The 20 s wait bound is below the
// agent's 30 s turn, so an ignored cancel fails the test.
func TestTurn_SessionCancelEndsTurnCancelled(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "cancel", "slow-turn=30000")
	id := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "slow"})
	s.waitTurnUpdate(o.Session, "t1")
	var c struct {
		Cancelled *bool `json:"cancelled"`
	}
	s.mustCall("session/cancel", map[string]any{"session": o.Session, "requestId": "t1"}, &c)
	if c.Cancelled == nil || !*c.Cancelled {
		t.Errorf("session/cancel result cancelled=%v, want true", c.Cancelled)
	}
	res := decodeResult[turnResult](t, "cancelled turn", s.await(id, 20*time.Second))
	if res.Status != "cancelled" || res.RequestID != "t1" {
		t.Errorf("turn result %+v, want status cancelled", res)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestTurn_CancelRequestEndsTurnCancelled: `$/cancelRequest` with the
// prompt's JSON-RPC id is the same as session/cancel for that turn
// (docs/protocol.md, $/cancelRequest): the result is status "cancelled".
func TestTurn_CancelRequestEndsTurnCancelled(t *testing.T) {
	cancelSlowTurn(t, "$/cancelRequest", (*sidecar).cancelRequest)
}

// TestStream_FloodOf20000UpdatesLosesNothing: 20000 unpaced updates of one
// turn all arrive, in the agent's order, with seq 1..N gap-free and the
// turn's requestId, before the turn's result (docs/protocol.md,
// session/prompt and session/update).
func TestStream_FloodOf20000UpdatesLosesNothing(t *testing.T) {
	const n = 20000
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "flood", fmt.Sprintf("flood=%d", n))
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "flood"}, &res)
	// The reader stores frames in wire order, so every update sent before
	// the result is already recorded here.
	ups := updatesOf(s, o.Session)
	if res.Status != "completed" || res.RequestID != "t1" {
		t.Errorf("turn result %+v, want completed t1", res)
	}
	if len(ups) < n+1 {
		t.Fatalf("%d updates before the result, want at least %d", len(ups), n+1)
	}
	flood := 0
	for i, u := range ups {
		if u.Seq != uint64(i+1) {
			t.Fatalf("update %d has seq %d, want %d (gap or reorder)", i, u.Seq, i+1)
		}
		if u.RequestID == nil || *u.RequestID != "t1" {
			t.Fatalf("update seq %d has requestId %v, want t1", u.Seq, u.RequestID)
		}
		var c struct {
			Kind    string `json:"sessionUpdate"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(u.Update, &c); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(c.Content.Text, "flood ") {
			if want := fmt.Sprintf("flood %d;", flood); c.Content.Text != want {
				t.Fatalf("update seq %d text %q, want %q (lost or reordered)", u.Seq, c.Content.Text, want)
			}
			flood++
		}
	}
	if flood != n {
		t.Errorf("%d flood chunks arrived, want %d", flood, n)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestStream_TwelveMegabyteUpdateArrivesWhole: a 12 MiB agent_message_chunk
// (larger than any default line buffer) is forwarded whole and verbatim, and
// the connection keeps working: a second turn completes (docs/protocol.md,
// session/update: update is the ACP SessionUpdate verbatim).
func TestStream_TwelveMegabyteUpdateArrivesWhole(t *testing.T) {
	const size = 12582912
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "long-line", fmt.Sprintf("long-line=%d", size))
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "long"}, &res)
	if res.Status != "completed" {
		t.Fatalf("turn result %+v", res)
	}
	found := 0
	for _, u := range updatesOf(s, o.Session) {
		if len(u.Update) < size {
			continue
		}
		var c struct {
			Kind    string `json:"sessionUpdate"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(u.Update, &c); err != nil {
			t.Fatal(err)
		}
		if c.Kind != "agent_message_chunk" {
			t.Errorf("large update kind %q", c.Kind)
		}
		if len(c.Content.Text) != size {
			t.Errorf("large chunk text is %d bytes, want %d", len(c.Content.Text), size)
		}
		if strings.Trim(c.Content.Text, "x") != "" {
			t.Errorf("large chunk text is not all 'x' as the agent sent it")
		}
		found++
	}
	if found != 1 {
		t.Fatalf("%d updates of >= %d bytes, want exactly 1", found, size)
	}
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "again"}, &res)
	if res.Status != "completed" || res.RequestID != "t2" {
		t.Errorf("second turn after the 12 MiB update: %+v", res)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestProvider_CrashMidTurnFailsTurnAndReportsExit: a provider that dies
// mid-turn fails the turn with PROVIDER_PROCESS_LOST, a session/exited
// (during "turn") and a cleanup/proof (origin provider-exit, complete) are
// sent, and a later prompt gets PROVIDER_PROCESS_LOST (docs/protocol.md,
// session/prompt, session/exited and cleanup/proof).
func TestProvider_CrashMidTurnFailsTurnAndReportsExit(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "crash", "crash-mid-turn")
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "crash"}, &res)
	if res.Status != "failed" || res.Error == nil || res.Error.Code != "PROVIDER_PROCESS_LOST" {
		t.Errorf("turn result %+v, want failed PROVIDER_PROCESS_LOST", res)
	}
	ex := s.waitNote("session/exited", 10*time.Second, func(p json.RawMessage) bool {
		var n struct {
			Session string `json:"session"`
		}
		return json.Unmarshal(p, &n) == nil && n.Session == o.Session
	})
	var exited struct {
		SessionKey string `json:"sessionKey"`
		Pid        int    `json:"pid"`
		ExitCode   *int   `json:"exitCode"`
		During     string `json:"during"`
	}
	_ = json.Unmarshal(ex, &exited)
	if exited.During != "turn" || exited.SessionKey != "crash" || exited.Pid != o.Process.Pid || exited.ExitCode == nil || *exited.ExitCode != 3 {
		t.Errorf("session/exited %s, want during turn, sessionKey crash, pid %d, exitCode 3", ex, o.Process.Pid)
	}
	pn := s.waitNote("cleanup/proof", 15*time.Second, func(p json.RawMessage) bool {
		var n struct {
			Proof proof `json:"proof"`
		}
		return json.Unmarshal(p, &n) == nil && n.Proof.Session == o.Session
	})
	var cp struct {
		Proof proof `json:"proof"`
	}
	_ = json.Unmarshal(pn, &cp)
	if cp.Proof.Origin != "provider-exit" || !cp.Proof.Complete {
		t.Errorf("cleanup/proof %s, want origin provider-exit complete true", truncate(string(pn), 600))
	}
	wantError(t, "prompt after the provider died",
		s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "again"}), -32000, "PROVIDER_PROCESS_LOST")
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestRunning_ProviderDeathFailsTurnAndLaterPrompts (docs/rules.md#r28): a
// provider that dies during a turn fails it (status failed,
// PROVIDER_PROCESS_LOST); a prompt sent right after fails the same way (as a
// failed turn or a request error, depending on whether the exit was already
// processed); once session/exited is out, prompts and model changes are
// refused -32000 PROVIDER_PROCESS_LOST and status says "dead".
func TestRunning_ProviderDeathFailsTurnAndLaterPrompts(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := seedMustOpen(s, e.openParams("lost", "crash-mid-turn"))
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "crash"}, &res)
	if res.Status != "failed" || res.Error == nil || res.Error.Code != "PROVIDER_PROCESS_LOST" {
		t.Errorf("t1 %+v, want failed PROVIDER_PROCESS_LOST", res)
	}
	f := s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "again"})
	if f.Error != nil {
		seedWantError(t, "prompt right after the loss", f, -32000, "PROVIDER_PROCESS_LOST")
	} else if r := decodeResult[turnResult](t, "t2", f); r.Status != "failed" || r.Error == nil || r.Error.Code != "PROVIDER_PROCESS_LOST" {
		t.Errorf("t2 %+v, want failed PROVIDER_PROCESS_LOST", r)
	}
	s.waitNote("session/exited", 20*time.Second, func(p json.RawMessage) bool {
		var n struct {
			Session string `json:"session"`
		}
		return json.Unmarshal(p, &n) == nil && n.Session == o.Session
	})
	seedWantError(t, "prompt after session/exited", s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t3", "prompt": "again"}),
		-32000, "PROVIDER_PROCESS_LOST")
	seedWantError(t, "setModel after session/exited", s.call("session/setModel", map[string]any{"session": o.Session, "model": "fa-large"}),
		-32000, "PROVIDER_PROCESS_LOST")
	var st struct {
		State string `json:"state"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.State != "dead" {
		t.Errorf("status state %q, want dead", st.State)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
