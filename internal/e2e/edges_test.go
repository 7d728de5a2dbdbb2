package e2e

// The edges of issue 33: agents that die quietly, answers in ACP's own
// shapes, errors that say why.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestStdinClosed_NextPromptFailsAtOnce: an agent that closes its stdin
// after session/new and lives on (ignoring SIGTERM) can never be reached
// again: the next prompt fails at once PROVIDER_PROCESS_LOST (not after the
// host gives up), the host hears session/exited reason "stdin-closed", and
// the tree is ended by the close policy with a complete provider-exit
// proof; nothing is left.
func TestStdinClosed_NextPromptFailsAtOnce(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "deafened", "close-stdin,ignore-term")
	start := time.Now()
	wantLostTurn(t, s, o.Session, "t1", "prompt to an agent whose stdin is closed")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the prompt took %v to fail", d)
	}
	s.waitNote("session/exited", 10*time.Second, func(p json.RawMessage) bool {
		var n struct {
			Session, Reason string
		}
		return json.Unmarshal(p, &n) == nil && n.Session == o.Session && n.Reason == "stdin-closed"
	})
	raw := s.waitNote("cleanup/proof", 15*time.Second, func(p json.RawMessage) bool {
		var rp recoveredProof
		return json.Unmarshal(p, &rp) == nil && rp.Proof.Session == o.Session
	})
	var rp recoveredProof
	_ = json.Unmarshal(raw, &rp)
	if !rp.Proof.Complete || rp.Proof.Origin != "provider-exit" {
		t.Errorf("proof %+v: want complete, origin provider-exit", rp.Proof)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	_, _ = s.shutdownAndExit()
}

// TestPermission_ACPNestedAnswerSelects (docs/protocol.md §9; issue 33): a
// host that answers in ACP's own shape, {"outcome": {"outcome":
// "selected", "optionId": …}}, selects the option (it was taken as a
// cancel).
func TestPermission_ACPNestedAnswerSelects(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	serveHost(s, func(int, *frame) any {
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "allow-once"}}
	})
	s.initialize(true)
	o := e.open(s, "perm-nested", "permission=execute")
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "ask"}, nil)
	if got := permissionChunk(s, o.Session, "t1"); got != "permission: selected allow-once" {
		t.Errorf("agent got %q for ACP's nested answer, want \"permission: selected allow-once\"", got)
	}
	if d := finalDecision(t, s, o.Session, "t1"); d.Decision != "approved" || d.OptionID != "allow-once" {
		t.Errorf("audit %+v, want approved allow-once", d)
	}
	closeClean(t, s, o.Session, e.mark, e.work)
}

// TestPermission_RefusedAnswerIsAskedAgain (issue 33): an answer in
// neither shape is refused -32602: the host is asked again, the new
// request carrying answerRefused (code -32602, data.field naming the
// member), the ask pending meanwhile; the corrected answer then decides.
func TestPermission_RefusedAnswerIsAskedAgain(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.hostUnchecked.Store(true) // the first answer breaks the schema on purpose
	h := serveHost(s, func(n int, _ *frame) any {
		if n == 1 {
			return map[string]string{"outcome": "approve", "optionId": "allow-once"}
		}
		return selected("allow-once")
	})
	s.initialize(true)
	o := e.open(s, "perm-refused", "permission=execute")
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "ask"}, nil)
	if got := permissionChunk(s, o.Session, "t1"); got != "permission: selected allow-once" {
		t.Errorf("agent got %q, want the corrected answer's \"permission: selected allow-once\"", got)
	}
	first, second := <-h.ch, <-h.ch
	var p1, p2 struct {
		AnswerRefused *struct {
			Code int `json:"code"`
			Data struct {
				Field string `json:"field"`
			} `json:"data"`
		} `json:"answerRefused"`
	}
	_ = json.Unmarshal(first.Params, &p1)
	_ = json.Unmarshal(second.Params, &p2)
	if p1.AnswerRefused != nil || p2.AnswerRefused == nil || p2.AnswerRefused.Code != -32602 || p2.AnswerRefused.Data.Field != "outcome" {
		t.Errorf("requests' answerRefused %+v then %+v: want none, then -32602 naming outcome", p1.AnswerRefused, p2.AnswerRefused)
	}
	closeClean(t, s, o.Session, e.mark, e.work)
}

// TestAdmission_FailureCarriesTheAgentsStderr (docs/protocol.md §5; issue
// 33): an agent that fails its start-up (here a bad flag) or never answers
// the handshake says why on its stderr; the open's error carries the end
// of it in data.stderr, with the open's env values redacted.
func TestAdmission_FailureCarriesTheAgentsStderr(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	secret := "sk-stderr-" + randHex(8)
	p := e.openParams("bad-flag", "")
	p["command"] = map[string]any{"path": faultBin, "args": []string{"--mode", secret}}
	p["env"].(map[string]string)["PROVIDER_API_KEY"] = secret
	f := s.call("session/open", p)
	var d struct {
		Code   string `json:"code"`
		Stderr string `json:"stderr"`
	}
	if f.Error == nil || json.Unmarshal(f.Error.Data, &d) != nil || d.Code != "ACPX_SESSION_ENSURE_FAILED" {
		t.Fatalf("open with a bad flag: %+v %s, want ACPX_SESSION_ENSURE_FAILED", f.Error, f.Result)
	}
	if !strings.Contains(d.Stderr, "unknown mode") || strings.Contains(d.Stderr, secret) || !strings.Contains(d.Stderr, "[redacted]") {
		t.Errorf("data.stderr %q: want the agent's complaint, the secret redacted", d.Stderr)
	}
	p = e.openParams("hung", "hang-initialize")
	p["handshakeTimeoutMs"] = 500
	f = s.call("session/open", p)
	if f.Error == nil || json.Unmarshal(f.Error.Data, &d) != nil || d.Code != "ACPX_SESSION_HANDSHAKE_TIMEOUT" || !strings.Contains(d.Stderr, "initialize") {
		t.Errorf("handshake timeout: %+v, data.stderr %q: want the agent's log of the initialize it got", f.Error, d.Stderr)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	_, _ = s.shutdownAndExit()
}

// TestStartup_MissingTMPDIRIsSaidAtStartAndInTheError (issue 33): a
// sidecar whose TMPDIR does not exist says so in its log at start, and a
// sandboxed open that needs a private TMPDIR fails PLATFORM_UNSUPPORTED,
// not retryable, naming the TMPDIR — nothing launched.
func TestStartup_MissingTMPDIRIsSaidAtStartAndInTheError(t *testing.T) {
	e := newFaultEnv(t)
	missing := "/nonexistent-acpx-tmp-" + randHex(4)
	s := startSidecarVia(t, []string{"/usr/bin/env", "TMPDIR=" + missing}, "--state-dir", e.stateDir)
	s.initialize(false)
	if !s.waitStderr(10*time.Second, "TMPDIR is not an existing directory") {
		t.Errorf("no start-up line about the missing TMPDIR in the log:\n%s", s.stderrText())
	}
	f := s.call("session/open", e.openParams("no-tmp", ""))
	var d struct {
		Code      string `json:"code"`
		Retryable bool   `json:"retryable"`
	}
	if f.Error == nil || json.Unmarshal(f.Error.Data, &d) != nil || d.Code != "PLATFORM_UNSUPPORTED" || d.Retryable || !strings.Contains(f.Error.Message, missing) {
		t.Errorf("open: %+v, want PLATFORM_UNSUPPORTED, not retryable, naming %s", f.Error, missing)
	}
	if n := len(markedPids(e.mark, e.work)); n != 0 {
		t.Errorf("%d processes launched", n)
	}
	_, _ = s.shutdownAndExit()
}

// TestConnectionLostInTurn_NextPromptIsRefused: an agent whose ACP
// connection ends during a turn while its process lives on (it closes its
// stdout and ignores SIGTERM): the turn fails PROVIDER_PROCESS_LOST, and
// the next prompt, sent at once, is refused PROVIDER_PROCESS_LOST as it is
// once the exit is seen — before, it was taken as a turn and failed in
// the result instead, depending on which came first (a Node client test
// saw both). The close ends the tree with a complete proof.
func TestConnectionLostInTurn_NextPromptIsRefused(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "muted", "mute-mid-turn,ignore-term")
	wantLostTurn(t, s, o.Session, "t1", "the muted turn")
	f := s.await(s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "again"}), 15*time.Second)
	if f.Error == nil || f.Error.dataCode() != "PROVIDER_PROCESS_LOST" {
		t.Errorf("the next prompt: %s %+v, want refused PROVIDER_PROCESS_LOST", f.Result, f.Error)
	}
	closeClean(t, s, o.Session, e.mark, e.work)
}

// wantLostTurn runs turn rid of session and fails the test unless its
// result is failed PROVIDER_PROCESS_LOST (what names the turn in the
// message).
func wantLostTurn(t *testing.T, s *sidecar, session, rid, what string) {
	t.Helper()
	f := s.await(s.start("session/prompt", map[string]any{"session": session, "requestId": rid, "prompt": "hi"}), 15*time.Second)
	var res struct {
		Status string `json:"status"`
		Error  *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if f.Error != nil || json.Unmarshal(f.Result, &res) != nil || res.Status != "failed" || res.Error == nil || res.Error.Code != "PROVIDER_PROCESS_LOST" {
		t.Fatalf("%s: %s %+v, want failed PROVIDER_PROCESS_LOST", what, f.Result, f.Error)
	}
}
