package e2e

// Permission tests (issue 5; PROTOCOL §4 session/open permissionMode,
// permissionPolicy, nonInteractivePermissions; §5 session/requestPermission
// and session/permission). The real codex-acp asks for `exec_command` when
// the loopback model stub sees a `run:` line; the fault agent's
// permission=<kind> and permission-title=<title> modes cover the rest and
// report what they were answered as an agent_message_chunk
// "permission: <outcome> <optionId>".

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// permNotice is a session/permission audit notification (PROTOCOL §5).
type permNotice struct {
	Session    string  `json:"session"`
	RequestID  *string `json:"requestId"`
	ToolCallID string  `json:"toolCallId"`
	Kind       string  `json:"kind"`
	Decision   string  `json:"decision"`
	Rule       string  `json:"rule"`
	OptionID   string  `json:"optionId"`
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

// selected is a host answer selecting optionID (PROTOCOL §5).
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

// closeClean closes session, requires a complete proof, and requires that
// no process of the test is left.
func closeClean(t *testing.T, s *sidecar, session, mark, work string) {
	t.Helper()
	p := closeProof(s, session, nil)
	if !p.Complete || !p.Verified.TreeEmpty {
		t.Fatalf("close proof not complete: %+v", p)
	}
	waitNoMarked(t, mark, work, 10*time.Second)
}

// faultAskedPerms is the fault agent's ToolCall and options for
// permission=execute (cmd/faultagent askPermission), to compare verbatim.
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

// ------------------------------------------------------------ real codex

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

// TestPermission_CodexApproveAllRunsCommand: permissionMode approve-all
// approves codex's execute request; the command runs and the decision is
// audited approved by rule permissionMode:approve-all (PROTOCOL §4, §5;
// issue 5).
func TestPermission_CodexApproveAllRunsCommand(t *testing.T) {
	run := runCodexPermissionTurn(t, map[string]any{"permissionMode": "approve-all"}, nil)
	if run.res.Status != "completed" {
		t.Errorf("turn: %+v", run.res)
	}
	if !run.made {
		t.Errorf("approved command did not run: made.txt absent")
	}
	d := run.decision(t)
	if d.Decision != "approved" || d.Kind != "execute" || d.Rule != "permissionMode:approve-all" || d.OptionID != "approved" {
		t.Errorf("audit %+v, want approved execute by permissionMode:approve-all with optionId approved", d)
	}
}

// TestPermission_CodexDenyAllRefusesCommand: permissionMode deny-all
// refuses the request; the command does not run, the decision is audited
// denied, and the turn still completes (PROTOCOL §4, §5; issue 5).
func TestPermission_CodexDenyAllRefusesCommand(t *testing.T) {
	run := runCodexPermissionTurn(t, map[string]any{"permissionMode": "deny-all"}, nil)
	if run.made {
		t.Errorf("denied command ran: made.txt exists")
	}
	d := run.decision(t)
	if d.Decision != "denied" || d.Kind != "execute" || d.Rule != "permissionMode:deny-all" {
		t.Errorf("audit %+v, want denied execute by permissionMode:deny-all", d)
	}
	wantTurnEndsAfterDenial(t, run.res)
}

// codexEscalation checks the escalated request the test host receives
// (PROTOCOL §5 session/requestPermission: toolCall/options verbatim, kind,
// rule) and answers it with the option of optionKind.
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

// TestPermission_CodexEscalateHostAllowRunsCommand: permissionPolicy
// escalate:[execute] with a host that declared permissionRequests sends the
// request to the host; its allow_once answer runs the command (PROTOCOL
// §5 session/requestPermission; issue 5).
func TestPermission_CodexEscalateHostAllowRunsCommand(t *testing.T) {
	run := runCodexPermissionTurn(t, map[string]any{"permissionMode": "deny-all",
		"permissionPolicy": map[string]any{"escalate": []string{"execute"}}}, codexEscalation("allow_once"))
	if !run.made {
		t.Errorf("host-approved command did not run: made.txt absent")
	}
	if run.res.Status != "completed" {
		t.Errorf("turn: %+v", run.res)
	}
	if len(run.notices) == 0 || run.notices[0].Decision != "escalated" || run.notices[0].Rule != "permissionPolicy.escalate" {
		t.Errorf("first audit should be escalated by permissionPolicy.escalate: %+v", run.notices)
	}
	if d := run.decision(t); d.Decision != "approved" || d.OptionID != "approved" {
		t.Errorf("final audit %+v, want approved with optionId approved", d)
	}
}

// TestPermission_CodexEscalateHostRejectRefusesCommand: the same escalation
// answered with the reject_once option: the command does not run
// (PROTOCOL §5; issue 5).
func TestPermission_CodexEscalateHostRejectRefusesCommand(t *testing.T) {
	run := runCodexPermissionTurn(t, map[string]any{"permissionMode": "approve-all",
		"permissionPolicy": map[string]any{"escalate": []string{"execute"}}}, codexEscalation("reject_once"))
	if run.made {
		t.Errorf("host-rejected command ran: made.txt exists")
	}
	if d := run.decision(t); d.Decision != "denied" || d.OptionID != "abort" {
		t.Errorf("final audit %+v, want denied with optionId abort", d)
	}
}

// TestPermission_CodexNonInteractiveFailEndsTurnFailed: approve-reads
// escalates execute; the host did not declare permissionRequests and
// nonInteractivePermissions is "fail", so the turn ends failed with
// PERMISSION_APPROVAL_REQUIRED and the command does not run (PROTOCOL §4
// nonInteractivePermissions; issue 5).
func TestPermission_CodexNonInteractiveFailEndsTurnFailed(t *testing.T) {
	run := runCodexPermissionTurn(t, map[string]any{"permissionMode": "approve-reads", "nonInteractivePermissions": "fail"}, nil)
	if run.res.Status != "failed" || run.res.Error == nil || run.res.Error.Code != "PERMISSION_APPROVAL_REQUIRED" {
		t.Errorf("turn %+v, want failed with PERMISSION_APPROVAL_REQUIRED", run.res)
	}
	if run.made {
		t.Errorf("unapproved command ran: made.txt exists")
	}
	if d := run.decision(t); d.Decision != "cancelled" || d.Kind != "execute" || !strings.Contains(d.Rule, "nonInteractivePermissions:fail") {
		t.Errorf("audit %+v, want the ask answered cancelled naming nonInteractivePermissions:fail", d)
	}
}

// TestPermission_CodexNonInteractiveDenyRefusesAtOnce: the same escalation
// with nonInteractivePermissions "deny" is refused at once: decision
// denied, no file, the turn completes (PROTOCOL §4; issue 5).
func TestPermission_CodexNonInteractiveDenyRefusesAtOnce(t *testing.T) {
	run := runCodexPermissionTurn(t, map[string]any{"permissionMode": "approve-reads", "nonInteractivePermissions": "deny"}, nil)
	if run.made {
		t.Errorf("denied command ran: made.txt exists")
	}
	d := run.decision(t)
	if d.Decision != "denied" || d.Kind != "execute" || !strings.Contains(d.Rule, "nonInteractivePermissions") {
		t.Errorf("audit %+v, want denied execute naming nonInteractivePermissions", d)
	}
	for _, n := range run.notices {
		if n.Decision == "escalated" {
			t.Errorf("a host without permissionRequests got an escalation: %+v", n)
		}
	}
	wantTurnEndsAfterDenial(t, run.res)
}

// ----------------------------------------------------------- fault agent

// TestPermission_CancelAnswersPendingAskAndLateAnswerIsIgnored: while the
// host sits on an escalated request, session/cancel answers the agent
// `cancelled`, the turn ends cancelled and the decision is audited
// cancelled; the host's late allow for that request approves nothing: the
// agent's next ask (a new turn) gets what the host answers then (PROTOCOL
// §4 session/cancel, §5 "the authority is the turn's"; issue 5).
func TestPermission_CancelAnswersPendingAskAndLateAnswerIsIgnored(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	h := serveHost(s, func(int, *frame) any { return nil }) // the test answers itself
	s.initialize(true)
	o := e.open(s, "perm-cancel", "permission=execute")

	t1 := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "ask"})
	f1, p1 := h.next(t, 20*time.Second)
	if p1.Kind != "execute" || p1.Rule != "permissionMode:approve-reads" || p1.RequestID == nil || *p1.RequestID != "t1" || p1.Session != o.Session {
		t.Errorf("requestPermission %+v, want kind execute rule permissionMode:approve-reads requestId t1", p1)
	}
	if !sameJSON(p1.ToolCall, json.RawMessage(faultToolCallExecute)) || !sameJSON(p1.Options, json.RawMessage(faultOptions)) {
		t.Errorf("toolCall/options not verbatim:\n toolCall %s\n options %s", p1.ToolCall, p1.Options)
	}
	var c struct {
		Cancelled bool `json:"cancelled"`
	}
	s.mustCall("session/cancel", map[string]any{"session": o.Session, "requestId": "t1"}, &c)
	if !c.Cancelled {
		t.Errorf("session/cancel answered cancelled=false during a turn")
	}
	res := decodeResult[turnResult](t, "cancelled turn", s.await(t1, 20*time.Second))
	if res.Status != "cancelled" {
		t.Errorf("turn t1 %+v, want cancelled", res)
	}
	if got := permissionChunk(s, o.Session, "t1"); got != "permission: cancelled" {
		t.Errorf("agent's answer in t1: %q, want \"permission: cancelled\"", got)
	}
	if d := finalDecision(t, s, o.Session, "t1"); d.Decision != "cancelled" || d.ToolCallID != "fa-call-1" {
		t.Errorf("t1 audit %+v, want decision cancelled for fa-call-1", d)
	}

	// The late host answer for the first request: it must change nothing.
	late := map[string]any{"jsonrpc": "2.0", "id": f1.ID, "result": selected("allow-once")}
	s.send(late)
	t2 := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "ask again"})
	f2, p2 := h.next(t, 20*time.Second)
	if p2.RequestID == nil || *p2.RequestID != "t2" {
		t.Errorf("second ask names requestId %v, want t2", p2.RequestID)
	}
	if string(f2.ID) == string(f1.ID) {
		t.Errorf("the second ask reuses the host request id %s of the cancelled one", f1.ID)
	}
	s.send(late) // again, while the second ask is pending
	s.send(map[string]any{"jsonrpc": "2.0", "id": f2.ID, "result": selected("reject-once")})
	res = decodeResult[turnResult](t, "second turn", s.await(t2, 20*time.Second))
	if res.Status != "completed" {
		t.Errorf("turn t2 %+v, want completed", res)
	}
	if got := permissionChunk(s, o.Session, "t2"); got != "permission: selected reject-once" {
		t.Errorf("agent's answer in t2: %q, want \"permission: selected reject-once\" (the host's second answer, not the late allow)", got)
	}
	if d := finalDecision(t, s, o.Session, "t2"); d.Decision != "denied" || d.OptionID != "reject-once" {
		t.Errorf("t2 audit %+v, want denied reject-once", d)
	}
	closeClean(t, s, o.Session, e.mark, e.work)
}

// TestPermission_UnknownOptionIDIsCancelled: a host answer selecting an
// optionId the agent did not offer is treated as cancelled (PROTOCOL §5).
func TestPermission_UnknownOptionIDIsCancelled(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	serveHost(s, func(int, *frame) any { return selected("no-such-option") })
	s.initialize(true)
	o := e.open(s, "perm-unknown-option", "permission=execute")
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "ask"}, &res)
	if got := permissionChunk(s, o.Session, "t1"); got != "permission: cancelled" {
		t.Errorf("agent got %q for an unknown optionId, want \"permission: cancelled\"", got)
	}
	if d := finalDecision(t, s, o.Session, "t1"); d.Decision != "cancelled" || d.OptionID != "" {
		t.Errorf("audit %+v, want cancelled without optionId", d)
	}
	closeClean(t, s, o.Session, e.mark, e.work)
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

// TestPermission_ApproveReadsByKind: the default permissionMode
// approve-reads approves kind read and escalates execute, which without a
// host follows nonInteractivePermissions: deny refuses, fail fails the
// turn with PERMISSION_APPROVAL_REQUIRED (PROTOCOL §4; issue 5).
func TestPermission_ApproveReadsByKind(t *testing.T) {
	runFaultPermCases(t, []faultPermCase{
		{name: "read-approved", modes: "permission=read",
			wantChunk: "permission: selected allow-once", decision: "approved", kind: "read", rule: "permissionMode:approve-reads"},
		{name: "execute-noninteractive-deny", modes: "permission=execute", open: map[string]any{"nonInteractivePermissions": "deny"},
			wantChunk: "permission: selected reject-once", decision: "denied", kind: "execute", rule: "permissionMode:approve-reads"},
		{name: "execute-default-is-deny", modes: "permission=execute",
			wantChunk: "permission: selected reject-once", decision: "denied", kind: "execute", rule: "permissionMode:approve-reads"},
		{name: "execute-noninteractive-fail", modes: "permission=execute", open: map[string]any{"nonInteractivePermissions": "fail"},
			wantChunk: "permission: cancelled", decision: "cancelled", kind: "execute", rule: "permissionMode:approve-reads",
			status: "failed", errCode: "PERMISSION_APPROVAL_REQUIRED"},
	})
}

// TestPermission_KindInferredFromTitle: a request whose toolCall has no
// kind but the title "Read file foo" is treated as kind read, so
// approve-reads approves it (issue 5: "inferred from the title when
// missing").
func TestPermission_KindInferredFromTitle(t *testing.T) {
	runFaultPermCases(t, []faultPermCase{
		{name: "title-read", modes: "permission-title=Read file foo",
			wantChunk: "permission: selected allow-once", decision: "approved", kind: "read", rule: "permissionMode:approve-reads"},
	})
}

// TestPermission_PolicyRules: permissionPolicy is evaluated before
// permissionMode; autoDeny beats autoApprove for the same kind; autoApprove
// and escalate apply to listed kinds; defaultAction applies to kinds not
// listed (PROTOCOL §4 permissionPolicy; issue 5).
func TestPermission_PolicyRules(t *testing.T) {
	runFaultPermCases(t, []faultPermCase{
		{name: "autodeny-beats-autoapprove", modes: "permission=edit", open: map[string]any{"permissionMode": "approve-all",
			"permissionPolicy": map[string]any{"autoApprove": []string{"edit"}, "autoDeny": []string{"edit"}}},
			wantChunk: "permission: selected reject-once", decision: "denied", kind: "edit", rule: "permissionPolicy.autoDeny"},
		{name: "autoapprove-before-mode", modes: "permission=delete", open: map[string]any{"permissionMode": "deny-all",
			"permissionPolicy": map[string]any{"autoApprove": []string{"delete"}}},
			wantChunk: "permission: selected allow-once", decision: "approved", kind: "delete", rule: "permissionPolicy.autoApprove"},
		{name: "default-deny-unlisted", modes: "permission=fetch", open: map[string]any{"permissionMode": "approve-all",
			"permissionPolicy": map[string]any{"autoApprove": []string{"read"}, "defaultAction": "deny"}},
			wantChunk: "permission: selected reject-once", decision: "denied", kind: "fetch", rule: "permissionPolicy.defaultAction"},
		{name: "default-approve-unlisted", modes: "permission=execute", open: map[string]any{"permissionMode": "deny-all",
			"permissionPolicy": map[string]any{"autoDeny": []string{"delete"}, "defaultAction": "approve"}},
			wantChunk: "permission: selected allow-once", decision: "approved", kind: "execute", rule: "permissionPolicy.defaultAction"},
		{name: "listed-kind-not-default", modes: "permission=read", open: map[string]any{"permissionMode": "deny-all",
			"permissionPolicy": map[string]any{"autoApprove": []string{"read"}, "defaultAction": "deny"}},
			wantChunk: "permission: selected allow-once", decision: "approved", kind: "read", rule: "permissionPolicy.autoApprove"},
	})
}
