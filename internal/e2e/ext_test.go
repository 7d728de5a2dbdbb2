package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Extension methods and _meta (docs/protocol.md §23; PROTOCOL.md §9
// "Extension methods and `_meta`"), against the fault agent's modes
// ext-notify, ext-ask and its `_fa/echo`, `_fa/fail`, `_fa/seen`
// (internal/faultagent/modes_ext.go).

// initExt initializes with capabilities.extRequests as given.
func initExt(s *sidecar, ext bool) {
	s.t.Helper()
	s.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientInfo": map[string]string{"name": "e2e", "version": "0"},
		"capabilities": map[string]bool{"permissionRequests": false, "extRequests": ext}}, nil)
}

// extNote is the params of session/extNotification.
type extNote struct {
	Session string          `json:"session"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

func waitExtNote(s *sidecar, session, method string) extNote {
	s.t.Helper()
	var n extNote
	raw := s.waitNote("session/extNotification", 20*time.Second, func(p json.RawMessage) bool {
		return json.Unmarshal(p, &n) == nil && n.Session == session && n.Method == method
	})
	_ = json.Unmarshal(raw, &n)
	return n
}

// TestExt_AgentNotificationReachesHostAfterOpenAndIsJournaled: the `_…`
// notification an agent sends during session/new (as codex-acp 2.6 sends
// `_auth/status_update`) reaches the host as session/extNotification
// after the open's result, params verbatim, and is in the journal.
func TestExt_AgentNotificationReachesHostAfterOpenAndIsJournaled(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	initExt(s, false)
	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "ext-note", rec, "ext-notify"))
	n := waitExtNote(s, o.Session, "_fa/status")
	var p struct {
		SessionID string `json:"sessionId"`
		State     string `json:"state"`
	}
	if err := json.Unmarshal(n.Params, &p); err != nil || p.State != "new" || p.SessionID != o.Identity.BackendSessionID {
		t.Errorf("extNotification params %s, want the agent's {sessionId: %s, state: new}", n.Params, o.Identity.BackendSessionID)
	}
	// Sent after the open's answer: the host knows the session by then.
	s.mu.Lock()
	openAt, noteAt := -1, -1
	for i, raw := range s.raw {
		if strings.Contains(string(raw), `"method":"session/extNotification"`) && noteAt < 0 {
			noteAt = i
		}
		if strings.Contains(string(raw), `"backendSessionId":"`+o.Identity.BackendSessionID+`"`) && openAt < 0 {
			openAt = i
		}
	}
	s.mu.Unlock()
	if openAt < 0 || noteAt < openAt {
		t.Errorf("extNotification frame %d before the open's result %d", noteAt, openAt)
	}
	var ev struct {
		Events []struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"events"`
	}
	s.mustCall("session/events", map[string]any{"sessionKey": "ext-note", "stateDir": e.stateDir}, &ev)
	found := false
	for _, x := range ev.Events {
		found = found || (x.Method == "session/extNotification" && strings.Contains(string(x.Params), `"_fa/status"`))
	}
	if !found {
		t.Errorf("journal has no session/extNotification: %+v", ev.Events)
	}
	seedReadAgent(t, rec) // ACP v1 check of every frame the agent got
}

// TestExt_HostRequestsAndNotificationsReachTheAgent: session/extRequest
// round trips (result verbatim, agent error as AGENT_ERROR with
// data.agentError), session/extNotification reaches the agent, and a
// method without the `_` prefix is refused -32602 and never sent.
func TestExt_HostRequestsAndNotificationsReachTheAgent(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	initExt(s, false)
	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "ext-host", rec, ""))

	var res struct {
		Result json.RawMessage `json:"result"`
	}
	s.mustCall("session/extRequest", map[string]any{"session": o.Session, "method": "_fa/echo",
		"params": json.RawMessage(`{"a":[1,"b",{"c":null}],"z":2.50}`)}, &res)
	if string(res.Result) != `{"echo":{"a":[1,"b",{"c":null}],"z":2.50}}` {
		t.Errorf("extRequest result %s, want the agent's echo verbatim", res.Result)
	}

	f := s.call("session/extRequest", map[string]any{"session": o.Session, "method": "_fa/fail"})
	wantError(t, "agent error", f, -32000, "AGENT_ERROR")
	var d struct {
		AgentError struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"agentError"`
	}
	_ = json.Unmarshal(f.Error.Data, &d)
	if d.AgentError.Code != -32042 || d.AgentError.Message != "fa refused" || string(d.AgentError.Data) != `{"why":"asked to"}` {
		t.Errorf("data.agentError %+v (%s), want the agent's error verbatim", d.AgentError, d.AgentError.Data)
	}
	f = s.call("session/extRequest", map[string]any{"session": o.Session, "method": "_fa/unknown"})
	if wantError(t, "unknown ext method", f, -32000, "AGENT_ERROR"); !strings.Contains(string(f.Error.Data), "-32601") {
		t.Errorf("unknown ext method: data %s, want the agent's -32601", f.Error.Data)
	}
	for _, m := range []string{"session/prompt", "initialize", "fs/read_text_file", "_", ""} {
		f := s.call("session/extRequest", map[string]any{"session": o.Session, "method": m, "params": map[string]any{}})
		if d := wantError(t, "non-extension method "+m, f, -32602, ""); d.Field != "method" {
			t.Errorf("%q: data.field %q, want method", m, d.Field)
		}
	}
	s.send(map[string]any{"jsonrpc": "2.0", "method": "session/extNotification",
		"params": map[string]any{"session": o.Session, "method": "_host/ping", "params": map[string]any{"x": 1}}})
	seen := waitExtNote(s, o.Session, "_fa/seen")
	if !strings.Contains(string(seen.Params), `"method":"_host/ping"`) || !strings.Contains(string(seen.Params), `"params":{"x":1}`) {
		t.Errorf("the agent saw %s, want _host/ping {x:1}", seen.Params)
	}
	// A non-`_` notification is dropped: the agent never gets it.
	s.send(map[string]any{"jsonrpc": "2.0", "method": "session/extNotification",
		"params": map[string]any{"session": o.Session, "method": "session/cancel", "params": map[string]any{"sessionId": o.Identity.BackendSessionID}}})
	s.mustCall("session/extRequest", map[string]any{"session": o.Session, "method": "_fa/echo"}, nil) // a barrier: the agent handled everything before it
	msgs := seedReadAgent(t, rec)
	for _, m := range msgs {
		if m.Dir == "recv" && (m.Msg.Method == "session/prompt" || m.Msg.Method == "fs/read_text_file" || m.Msg.Method == "session/cancel") {
			t.Errorf("a refused method reached the agent: %s", m.raw)
		}
	}
	if len(seedRecv(msgs, "_host/ping")) != 1 || len(seedRecv(msgs, "_fa/echo")) != 2 {
		t.Errorf("the agent got %d _host/ping and %d _fa/echo, want 1 and 2", len(seedRecv(msgs, "_host/ping")), len(seedRecv(msgs, "_fa/echo")))
	}
	f = s.call("session/extRequest", map[string]any{"session": "s-nope", "method": "_fa/echo"})
	wantError(t, "unknown session", f, -32000, "SESSION_NOT_FOUND")
}

// TestExt_AgentRequestsReachTheHostThatDeclaredThem: an agent's `_…`
// request is the host's session/extRequest (the turn's requestId), the
// host's result and error go back verbatim; without
// capabilities.extRequests the agent gets -32601.
func TestExt_AgentRequestsReachTheHostThatDeclaredThem(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	held := make(chan *frame, 4)
	n := 0
	s.onRequest = func(f *frame) any {
		if f.Method != "session/extRequest" {
			t.Errorf("unexpected host request %s", f.Method)
			return nil
		}
		n++
		if n == 1 {
			return json.RawMessage(`{"answer":42,"list":["x"]}`)
		}
		held <- f // answered by the test with an error
		return nil
	}
	initExt(s, true)
	o := seedMustOpen(s, seedOpenParams(e, "ext-ask", seedRecordFile(t), "ext-ask=_fa/ask"))

	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "go"}, nil)
	if got := extChunk(s, o.Session, "t1"); got != `ext: result {"answer":42,"list":["x"]}` {
		t.Errorf("agent got %q, want the host's result verbatim", got)
	}
	var req struct {
		Session   string          `json:"session"`
		RequestID *string         `json:"requestId"`
		Method    string          `json:"method"`
		Params    json.RawMessage `json:"params"`
	}
	for _, f := range s.requestsOf("session/extRequest") {
		_ = json.Unmarshal(f.Params, &req)
	}
	if req.Session != o.Session || req.RequestID == nil || *req.RequestID != "t1" || req.Method != "_fa/ask" ||
		string(req.Params) != `{"q":"ping","sessionId":"`+o.Identity.BackendSessionID+`"}` {
		t.Errorf("host got session/extRequest %+v params %s", req, req.Params)
	}

	done := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "go"})
	select {
	case f := <-held:
		s.send(map[string]any{"jsonrpc": "2.0", "id": f.ID, "error": map[string]any{"code": -32099, "message": "host says no", "data": map[string]string{"k": "v"}}})
	case <-time.After(20 * time.Second):
		t.Fatal("no second session/extRequest")
	}
	if f := s.await(done, 30*time.Second); f.Error != nil {
		t.Fatalf("t2: %s", f.Error.Message)
	}
	if got := extChunk(s, o.Session, "t2"); got != `ext: error -32099 host says no {"k":"v"}` {
		t.Errorf("agent got %q, want the host's error verbatim", got)
	}

	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	// A host that did not declare extRequests: the agent gets -32601.
	s2 := startSidecar(t, "--state-dir", e.stateDir)
	s2.onRequest = func(f *frame) any { t.Errorf("unexpected host request %s", f.Method); return nil }
	initExt(s2, false)
	o2 := seedMustOpen(s2, seedOpenParams(e, "ext-ask-2", seedRecordFile(t), "ext-ask=_fa/ask"))
	s2.mustCall("session/prompt", map[string]any{"session": o2.Session, "requestId": "t1", "prompt": "go"}, nil)
	if got := extChunk(s2, o2.Session, "t1"); !strings.HasPrefix(got, "ext: error -32601 ") {
		t.Errorf("agent got %q, want -32601", got)
	}
}

// extChunk is the fault agent's "ext: …" report in turn requestID.
func extChunk(s *sidecar, session, requestID string) string {
	for _, c := range agentChunks(s, session, requestID) {
		if strings.HasPrefix(c, "ext: ") {
			return c
		}
	}
	return ""
}

// requestsOf returns the sidecar → host requests of method seen so far.
func (s *sidecar) requestsOf(method string) []*frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*frame
	for _, raw := range s.raw {
		var f frame
		if json.Unmarshal(raw, &f) == nil && f.Method == method && len(f.ID) > 0 {
			out = append(out, &f)
		}
	}
	return out
}

// TestExt_MetaReachesTheAgentUnderTheSidecarsKeys: _meta of session/open
// reaches session/new's _meta, the sidecar's systemPrompt over the
// host's key of that name; _meta of session/prompt reaches session/prompt.
func TestExt_MetaReachesTheAgentUnderTheSidecarsKeys(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	initExt(s, false)
	rec := seedRecordFile(t)
	p := seedOpenParams(e, "meta", rec, "")
	p["_meta"] = map[string]any{"host.trace": map[string]any{"id": "abc", "n": 1}, "systemPrompt": "the host's"}
	p["systemPrompt"] = "be brief"
	o := seedMustOpen(s, p)
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "hi",
		"_meta": map[string]any{"turn.trace": "t-1"}}, nil)
	msgs := seedReadAgent(t, rec)
	news, prompts := seedRecv(msgs, "session/new"), seedRecv(msgs, "session/prompt")
	if len(news) != 1 || len(prompts) != 1 {
		t.Fatalf("agent got %d session/new and %d session/prompt", len(news), len(prompts))
	}
	var np struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(news[0].Msg.Params, &np)
	if string(np.Meta["host.trace"]) != `{"id":"abc","n":1}` || string(np.Meta["systemPrompt"]) != `{"append":"be brief"}` {
		t.Errorf("session/new _meta %s, want the host's key and the sidecar's systemPrompt over the host's", news[0].Msg.Params)
	}
	_ = json.Unmarshal(prompts[0].Msg.Params, &np)
	if string(np.Meta["turn.trace"]) != `"t-1"` {
		t.Errorf("session/prompt params %s, want _meta.turn.trace", prompts[0].Msg.Params)
	}
	f := s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "hi", "_meta": "no"})
	if d := wantError(t, "_meta not an object", f, -32602, ""); d.Field != "_meta" {
		t.Errorf("data.field %q, want _meta", d.Field)
	}
}

// TestExt_AgentRequestIsBoundedLikePermissions: a host that does not
// answer an agent's `_…` request within permissionTimeoutMs leaves the
// agent answered -32603, and its late answer is dropped (the turn goes on
// and completes).
func TestExt_AgentRequestIsBoundedLikePermissions(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	held := make(chan *frame, 1)
	s.onRequest = func(f *frame) any { held <- f; return nil } // answered late, below
	initExt(s, true)
	p := seedOpenParams(e, "ext-bound", seedRecordFile(t), "ext-ask=_fa/ask")
	p["permissionTimeoutMs"] = 300
	o := seedMustOpen(s, p)
	turn := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "go"})
	var f *frame
	select {
	case f = <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("no session/extRequest")
	}
	if r := s.await(turn, 30*time.Second); r.Error != nil {
		t.Fatalf("t1: %s", r.Error.Message)
	}
	if got := extChunk(s, o.Session, "t1"); !strings.HasPrefix(got, "ext: error -32603 the host did not answer within 300ms") {
		t.Errorf("agent got %q, want -32603 after permissionTimeoutMs", got)
	}
	s.send(map[string]any{"jsonrpc": "2.0", "id": f.ID, "result": map[string]any{"late": true}})
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "again"}, nil)
}
