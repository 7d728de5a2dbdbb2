package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// TestAttack_HostFramesStayValidNDJSON: an agent (mode inject) reports
// capabilities with bytes that are not UTF-8, sends an update with such
// bytes, one with a raw CR and a tab between tokens around a forged frame
// for another session (a host splitting lines on CR, as Node's readline
// does, would read it), and five updates that are not ACP SessionUpdates
// (issue 18). Every line the host gets is valid UTF-8 with no control
// byte; split on CR as well, no piece is a frame for another session; the
// bad bytes arrive as U+FFFD; the five are dropped (counted in
// sidecar/stats updatesDropped) and seq has no gap; a neighbour keeps
// streaming (docs/protocol.md §20).
func TestAttack_HostFramesStayValidNDJSON(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	var open struct {
		Session string `json:"session"`
		Agent   struct {
			Capabilities json.RawMessage `json:"capabilities"`
		} `json:"agent"`
	}
	s.mustCall("session/open", attackerParams(e, "inject", "inject"), &open)
	nb := startNeighbour(t, s, e, 200)
	runTurn(t, s, open.Session, "i1", "go")
	nb.check(t, 60*time.Second)
	var stats struct {
		UpdatesDropped uint64 `json:"updatesDropped"`
	}
	s.mustCall("sidecar/stats", map[string]any{}, &stats)
	if stats.UpdatesDropped != 5 {
		t.Errorf("updatesDropped %d, want the 5 updates that are not SessionUpdates", stats.UpdatesDropped)
	}
	if !strings.Contains(string(open.Agent.Capabilities), "INIT-\uFFFD\uFFFD") {
		t.Errorf("open result capabilities %s: want the invalid bytes as U+FFFD", open.Agent.Capabilities)
	}
	chunks := agentChunks(s, open.Session, "i1")
	if !contains(chunks, "BAD-UTF8-\uFFFD\uFFFD") || !contains(chunks, "cr") || !contains(chunks, "inject-done") {
		t.Errorf("the agent's updates did not arrive cleaned: %q", chunks)
	}
	for i, u := range updatesOf(s, open.Session) {
		if u.Seq != uint64(i+1) {
			t.Fatalf("update %d has seq %d", i, u.Seq)
		}
	}
	_, _ = s.shutdownAndExit()
	s.mu.Lock()
	raw := append([][]byte(nil), s.raw...)
	s.mu.Unlock()
	sessions := map[string]bool{open.Session: true, nb.session: true}
	for _, line := range raw {
		body := bytes.TrimSuffix(line, []byte("\n"))
		if !utf8.Valid(body) || bytes.ContainsFunc(body, func(r rune) bool { return r < 0x20 }) {
			t.Fatalf("host line is not clean NDJSON: %q", truncate(string(body), 300))
		}
		for _, piece := range bytes.FieldsFunc(body, func(r rune) bool { return r == '\r' || r == '\n' || r == '\u2028' || r == '\u2029' }) {
			var f struct {
				Method string `json:"method"`
				Params struct {
					Session string `json:"session"`
				} `json:"params"`
			}
			if json.Unmarshal(piece, &f) == nil && f.Method != "" && f.Params.Session != "" && !sessions[f.Params.Session] {
				t.Fatalf("a host splitting lines reads a frame for session %q: %q", f.Params.Session, truncate(string(piece), 300))
			}
		}
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAttack_DecoderDisagreementsAreRefused: asks that a case-insensitive
// or merging decoder reads otherwise than ACP means them — `Kind` for
// `kind`, `rawInput` beside `rawinput`, `kind` twice, two options with one
// optionId — are not judged (issue 18: approve-reads approved them, and
// the audit of a host's pick of the duplicated "x" said approved): each is
// answered cancelled and audited "malformed", never reaching the host;
// the well-formed ask the host answers with its reject option is audited
// denied with that option's own kind (docs/protocol.md §20).
func TestAttack_DecoderDisagreementsAreRefused(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	var mu sync.Mutex
	var asked []string
	serveHost(s, func(n int, f *frame) any { // one request: within its channel's buffer
		var p permRequest
		_ = json.Unmarshal(f.Params, &p)
		mu.Lock()
		asked = append(asked, string(p.ToolCall))
		mu.Unlock()
		return selected(optionOfKind(t, p.Options, "reject_once"))
	})
	s.initialize(true)
	o := openAttacker(s, e, "variants", "ask-variants") // permissionMode approve-reads (the default)
	nb := startNeighbour(t, s, e, 200)
	runTurn(t, s, o.Session, "v1", "go")
	nb.check(t, 60*time.Second)
	chunks := agentChunks(s, o.Session, "v1")
	for _, name := range []string{"case-kind", "rawinput-twice", "kind-twice", "option-twice"} {
		if !contains(chunks, "variant "+name+": cancelled") {
			t.Errorf("%s: agent got %q, want cancelled", name, chunks)
		}
	}
	if !contains(chunks, "variant host-pick: selected reject-once") {
		t.Errorf("host-pick: agent got %q", chunks)
	}
	byCall := map[string]permNotice{}
	for _, n := range permissionNotes(s, o.Session) {
		if n.Decision != "escalated" {
			byCall[n.ToolCallID] = n
		}
	}
	for _, id := range []string{"v-case", "v-raw", "v-dup", "v-opt"} {
		if n := byCall[id]; n.Decision != "malformed" || n.OptionID != "" {
			t.Errorf("%s audited %+v, want malformed", id, n)
		}
	}
	if n := byCall["v-pick"]; n.Decision != "denied" || n.OptionID != "reject-once" || n.OptionKind != "reject_once" {
		t.Errorf("host's pick audited %+v, want denied reject-once (reject_once)", n)
	}
	mu.Lock()
	if len(asked) != 1 || !strings.Contains(asked[0], "v-pick") {
		t.Errorf("the host was asked %d times (%q), want only the well-formed ask", len(asked), asked)
	}
	mu.Unlock()
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAttack_ResponseWithResultAndErrorIsIgnored: an agent first answers
// session/prompt with a response carrying both result and error (invalid
// JSON-RPC; issue 18: it was taken as the turn's answer), then streams on
// and answers properly: the invalid response is discarded, the turn's
// result is the real answer (stopReason max_tokens) and the update sent
// after the invalid one belongs to the turn.
func TestAttack_ResponseWithResultAndErrorIsIgnored(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := openAttacker(s, e, "double", "double-answer")
	nb := startNeighbour(t, s, e, 200)
	var res struct {
		Status     string `json:"status"`
		StopReason string `json:"stopReason"`
	}
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "d1", "prompt": "go"}, &res)
	if res.Status != "completed" || res.StopReason != "max_tokens" {
		t.Errorf("turn result %+v, want completed / max_tokens (the real answer)", res)
	}
	if chunks := agentChunks(s, o.Session, "d1"); !contains(chunks, "after-double") || !contains(chunks, "hello from faultagent") {
		t.Errorf("updates after the invalid response are not the turn's: %q", chunks)
	}
	nb.check(t, 60*time.Second)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
