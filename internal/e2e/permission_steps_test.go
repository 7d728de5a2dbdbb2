package e2e

// Steps of the permission tests: the session/permission audit and the
// session/requestPermission requests a test host receives, the fault
// agent's report of the answer it got, and one codex turn asking for a
// command.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// permNotice is a session/permission audit notification (docs/protocol.md,
// session/permission).
type permNotice struct {
	Session    string  `json:"session"`
	RequestID  *string `json:"requestId"`
	ToolCallID string  `json:"toolCallId"`
	Kind       string  `json:"kind"`
	Decision   string  `json:"decision"`
	Rule       string  `json:"rule"`
	OptionID   string  `json:"optionId"`
	OptionKind string  `json:"optionKind"`
}

// permRequest is the params of a sidecar → host session/requestPermission.
type permRequest struct {
	Session   string          `json:"session"`
	RequestID *string         `json:"requestId"`
	ToolCall  json.RawMessage `json:"toolCall"`
	Options   json.RawMessage `json:"options"`
	Kind      string          `json:"kind"`
	Rule      string          `json:"rule"`
}

// permOpt is one ACP PermissionOption.
type permOpt struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// permissionNotes returns the session/permission notices of session.
func permissionNotes(s *sidecar, session string) []permNotice {
	var out []permNotice
	for _, f := range s.notesOf("session/permission") {
		var n permNotice
		if json.Unmarshal(f.Params, &n) == nil && n.Session == session {
			out = append(out, n)
		}
	}
	return out
}

// finalDecision returns the last non-"escalated" notice of session's turn
// requestID, failing the test when there is none.
func finalDecision(t *testing.T, s *sidecar, session, requestID string) permNotice {
	t.Helper()
	var got *permNotice
	for _, n := range permissionNotes(s, session) {
		n := n
		if n.RequestID != nil && *n.RequestID == requestID && n.Decision != "escalated" {
			got = &n
		}
	}
	if got == nil {
		t.Fatalf("no session/permission decision for turn %s; notices: %+v", requestID, permissionNotes(s, session))
	}
	return *got
}

// agentChunks returns the agent_message_chunk texts of turn requestID.
func agentChunks(s *sidecar, session, requestID string) []string {
	var out []string
	for _, u := range updatesOf(s, session) {
		if u.RequestID == nil || *u.RequestID != requestID {
			continue
		}
		var h struct {
			Kind    string `json:"sessionUpdate"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(u.Update, &h) == nil && h.Kind == "agent_message_chunk" {
			out = append(out, h.Content.Text)
		}
	}
	return out
}

// permissionChunk is the fault agent's report of the answer it got
// ("permission: …") in turn requestID, or "" when it reported none.
func permissionChunk(s *sidecar, session, requestID string) string {
	for _, c := range agentChunks(s, session, requestID) {
		if strings.HasPrefix(c, "permission: ") {
			return c
		}
	}
	return ""
}

// hostRequests collects the session/requestPermission requests a test
// host receives; answer decides the reply (nil = the test answers later).
type hostRequests struct {
	ch chan *frame
}

// serveHost installs s.onRequest; call it before the first request.
func serveHost(s *sidecar, answer func(n int, f *frame) any) *hostRequests {
	h := &hostRequests{ch: make(chan *frame, 16)}
	var mu sync.Mutex
	n := 0
	s.onRequest = func(f *frame) any {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		h.ch <- f
		if f.Method != "session/requestPermission" {
			s.t.Errorf("unexpected sidecar → host request %s", f.Method)
			return map[string]string{"outcome": "cancelled"}
		}
		return answer(i, f)
	}
	return h
}

// next waits (bounded) for the next host request and decodes its params.
func (h *hostRequests) next(t *testing.T, d time.Duration) (*frame, permRequest) {
	t.Helper()
	select {
	case f := <-h.ch:
		var p permRequest
		if err := json.Unmarshal(f.Params, &p); err != nil {
			t.Fatalf("session/requestPermission params %s: %v", f.Params, err)
		}
		return f, p
	case <-time.After(d):
		t.Fatalf("no session/requestPermission reached the host within %v", d)
	}
	return nil, permRequest{}
}

// selected is a host answer selecting optionID (docs/protocol.md,
// session/requestPermission).
func selected(optionID string) map[string]string {
	return map[string]string{"outcome": "selected", "optionId": optionID}
}

// optionOfKind returns the optionId of the first option of ACP kind.
func optionOfKind(t *testing.T, raw json.RawMessage, kind string) string {
	t.Helper()
	var opts []permOpt
	if err := json.Unmarshal(raw, &opts); err != nil {
		t.Fatalf("options %s: %v", raw, err)
	}
	for _, o := range opts {
		if o.Kind == kind {
			return o.OptionID
		}
	}
	t.Fatalf("no option of kind %s in %s", kind, raw)
	return ""
}

// faultAskedPerms is the fault agent's ToolCall and options for
// permission=execute (the fault agent's askPermission), to compare verbatim.
const (
	faultToolCallExecute = `{"toolCallId":"fa-call-1","title":"faultagent tool (execute)","kind":"execute","status":"pending"}`
	faultOptions         = `[{"optionId":"allow-once","name":"Allow once","kind":"allow_once"},` +
		`{"optionId":"allow-always","name":"Allow always","kind":"allow_always"},` +
		`{"optionId":"reject-once","name":"Reject once","kind":"reject_once"},` +
		`{"optionId":"reject-always","name":"Reject always","kind":"reject_always"}]`
)

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// codexPermRun is the outcome of one codex turn that asks for
// `echo hi > made.txt`.
type codexPermRun struct {
	res     turnResult
	notices []permNotice
	made    bool // made.txt exists in the session cwd
}

// runCodexPermissionTurn opens the real codex-acp with extra open params,
// runs one turn whose model asks for exec_command `echo hi > made.txt`,
// closes the session (complete proof, nothing marked alive) and reports
// the turn. host non-nil declares capabilities.permissionRequests and
// answers with it.
func runCodexPermissionTurn(t *testing.T, extra map[string]any, host func(t *testing.T, h *hostRequests, s *sidecar)) codexPermRun {
	t.Helper()
	agent, codexHome, _ := codexEnv(t)
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	var h *hostRequests
	if host != nil {
		h = serveHost(s, func(int, *frame) any { return nil })
	}
	s.initialize(host != nil)
	params := map[string]any{"sessionKey": "codex-perm", "agent": "codex", "command": map[string]any{"path": agent},
		"cwd": e.work, "env": map[string]string{"OPENAI_API_KEY": "sk-" + randHex(8), "CODEX_HOME": codexHome, "HOME": codexHome, "ACPX_TEST_MARK": e.mark}}
	for k, v := range extra {
		params[k] = v
	}
	var open openResult
	s.mustCall("session/open", params, &open)
	id := s.start("session/prompt", map[string]any{"session": open.Session, "requestId": "t1",
		"prompt": "make a file\nrun: echo hi > made.txt"})
	if host != nil {
		host(t, h, s)
	}
	run := codexPermRun{res: decodeResult[turnResult](t, "codex turn", s.await(id, 60*time.Second))}
	run.notices = permissionNotes(s, open.Session)
	_, err := os.Stat(filepath.Join(e.work, "made.txt"))
	run.made = err == nil
	closeClean(t, s, open.Session, e.mark, e.work)
	return run
}

// decisionOf returns the last non-escalated notice of a codex run.
func (r codexPermRun) decision(t *testing.T) permNotice {
	t.Helper()
	for i := len(r.notices) - 1; i >= 0; i-- {
		if r.notices[i].Decision != "escalated" {
			return r.notices[i]
		}
	}
	t.Fatalf("no permission decision audited: %+v", r.notices)
	return permNotice{}
}

// wantTurnEndsAfterDenial requires that a turn whose permission was denied
// still ends with a normal result: completed, or — codex-acp's only reject
// option is `abort` (reject_once), on which codex ends the turn itself with
// ACP stopReason "cancelled" (observed) — the agent's own cancelled stop,
// never failed and never an error.
func wantTurnEndsAfterDenial(t *testing.T, res turnResult) {
	t.Helper()
	ok := res.Error == nil && (res.Status == "completed" || (res.Status == "cancelled" && res.StopReason == "cancelled"))
	if !ok || res.RequestID != "t1" {
		t.Errorf("turn after a denial: %+v, want it to end normally (completed, or the agent's own cancelled stop)", res)
	}
}

// codexEscalation checks the escalated request the test host receives
// (docs/protocol.md, session/requestPermission: toolCall/options verbatim,
// kind, rule) and answers it with the option of optionKind.
func codexEscalation(optionKind string) func(t *testing.T, h *hostRequests, s *sidecar) {
	return func(t *testing.T, h *hostRequests, s *sidecar) {
		f, p := h.next(t, 30*time.Second)
		if p.Kind != "execute" || p.Rule != "permissionPolicy.escalate" || p.RequestID == nil || *p.RequestID != "t1" {
			t.Errorf("requestPermission kind %q rule %q requestId %v, want execute, permissionPolicy.escalate, t1", p.Kind, p.Rule, p.RequestID)
		}
		var tc struct {
			ToolCallID string          `json:"toolCallId"`
			Kind       string          `json:"kind"`
			Title      string          `json:"title"`
			RawInput   json.RawMessage `json:"rawInput"`
		}
		if err := json.Unmarshal(p.ToolCall, &tc); err != nil || tc.ToolCallID == "" || tc.Kind != "execute" ||
			!strings.Contains(tc.Title, "echo hi > made.txt") || len(tc.RawInput) == 0 {
			t.Errorf("toolCall is not codex's verbatim: %s", truncate(string(p.ToolCall), 600))
		}
		var opts []permOpt
		_ = json.Unmarshal(p.Options, &opts)
		want := map[string]string{"approved": "allow_once", "approved-execpolicy-amendment": "allow_always", "abort": "reject_once"}
		if len(opts) != len(want) {
			t.Errorf("options %s, want codex's three (transcript)", p.Options)
		}
		for _, o := range opts {
			if want[o.OptionID] != o.Kind || o.Name == "" {
				t.Errorf("option %+v is not codex's verbatim (%s)", o, p.Options)
			}
		}
		s.send(map[string]any{"jsonrpc": "2.0", "id": f.ID, "result": selected(optionOfKind(t, p.Options, optionKind))})
	}
}

// faultPermCase is one fault-agent session whose single ask is decided by
// policy (no host).
type faultPermCase struct {
	name      string
	modes     string
	open      map[string]any
	wantChunk string // the agent's report
	decision  string
	kind      string
	rule      string
	status    string // turn status; "" = completed
	errCode   string
}

// runFaultPermCases runs each case in its own session of one sidecar
// whose host did not declare permissionRequests (not as subtests: the
// harness fails the parent test from its helpers).
func runFaultPermCases(t *testing.T, cases []faultPermCase) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	for _, c := range cases {
		func() {
			p := e.openParams("perm-"+c.name, c.modes)
			for k, v := range c.open {
				p[k] = v
			}
			var o openResult
			s.mustCall("session/open", p, &o)
			res := decodeResult[turnResult](t, c.name+" turn", s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "ask"}))
			want := c.status
			if want == "" {
				want = "completed"
			}
			if res.Status != want || (c.errCode != "" && (res.Error == nil || res.Error.Code != c.errCode)) {
				t.Errorf("%s: turn %+v, want status %s error %q", c.name, res, want, c.errCode)
			}
			if got := permissionChunk(s, o.Session, "t1"); got != c.wantChunk {
				t.Errorf("%s: agent got %q, want %q", c.name, got, c.wantChunk)
			}
			d := finalDecision(t, s, o.Session, "t1")
			if d.Decision != c.decision || d.Kind != c.kind || !strings.HasPrefix(d.Rule, c.rule) {
				t.Errorf("%s: audit %+v, want decision %s kind %s rule %s…", c.name, d, c.decision, c.kind, c.rule)
			}
			p2 := closeProof(s, o.Session, nil)
			if !p2.Complete {
				t.Errorf("%s: close proof not complete: %+v", c.name, p2)
			}
		}()
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
