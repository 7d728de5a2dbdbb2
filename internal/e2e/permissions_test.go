package e2e

// Permissions (docs/protocol.md, session/open permissionMode,
// permissionPolicy, nonInteractivePermissions; session/requestPermission
// and session/permission; Permission decisions). The real codex-acp asks
// for `exec_command` when the loopback model stub sees a `run:` line; the
// fault agent's permission=<kind> and permission-title=<title> modes cover
// the rest and report what they were answered as an agent_message_chunk
// "permission: <outcome> <optionId>".

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPermission_CodexApproveAllRunsCommand: permissionMode approve-all
// approves codex's execute request; the command runs and the decision is
// audited approved by rule permissionMode:approve-all (docs/protocol.md,
// session/open permissionMode and session/permission).
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

// TestPermission_CodexDenyAllRefusesCommand: permissionMode deny-all refuses
// the request; the command does not run, the decision is audited denied, and
// the turn still completes (docs/protocol.md, session/open permissionMode
// and session/permission).
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

// TestPermission_CodexEscalateHostAllowRunsCommand: permissionPolicy
// escalate:[execute] with a host that declared permissionRequests sends the
// request to the host; its allow_once answer runs the command
// (docs/protocol.md, session/requestPermission).
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
// (docs/protocol.md, session/requestPermission).
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
// PERMISSION_APPROVAL_REQUIRED and the command does not run
// (docs/protocol.md, session/open nonInteractivePermissions).
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
// with nonInteractivePermissions "deny" is refused at once: decision denied,
// no file, the turn completes (docs/protocol.md, session/open
// nonInteractivePermissions).
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

// TestPermission_CancelAnswersPendingAskAndLateAnswerIsIgnored: while the
// host sits on an escalated request, session/cancel answers the agent
// `cancelled`, the turn ends cancelled and the decision is audited
// cancelled; the host's late allow for that request approves nothing: the
// agent's next ask (a new turn) gets what the host answers then
// (docs/protocol.md, session/cancel and Permission decisions: the authority
// is the turn's).
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
// optionId the agent did not offer is treated as cancelled
// (docs/protocol.md, Permission decisions).
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

// TestPermission_CaseVariantOrTwiceNamedAnswerIsCancelled: member names
// of the host's answer are case-sensitive and named once (docs/protocol.md
// §3): "OptionID", "OPTIONID", "Outcome" or two optionIds never select an
// option — the ask is cancelled, in either order of the members (the
// last one had won; found by a fresh-user trial).
func TestPermission_CaseVariantOrTwiceNamedAnswerIsCancelled(t *testing.T) {
	for i, answer := range []string{
		`{"outcome":"selected","OptionID":"reject-once","optionId":"allow-once"}`,
		`{"outcome":"selected","optionId":"allow-once","OptionID":"reject-once"}`,
		`{"outcome":"selected","OPTIONID":"allow-once"}`,
		`{"Outcome":"selected","optionId":"allow-once"}`,
		`{"outcome":"selected","optionId":"reject-once","optionId":"allow-once"}`,
	} {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			e := newFaultEnv(t)
			s := startSidecar(t, "--state-dir", e.stateDir)
			s.hostUnchecked.Store(true) // the answers break the schema on purpose
			serveHost(s, func(int, *frame) any { return json.RawMessage(answer) })
			s.initialize(true)
			o := e.open(s, "perm-strict", "permission=execute")
			var res turnResult
			s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "ask"}, &res)
			if got := permissionChunk(s, o.Session, "t1"); got != "permission: cancelled" {
				t.Errorf("%s: agent got %q, want \"permission: cancelled\"", answer, got)
			}
			if d := finalDecision(t, s, o.Session, "t1"); d.Decision == "approved" {
				t.Errorf("%s: audit %+v, want not approved", answer, d)
			}
			closeClean(t, s, o.Session, e.mark, e.work)
		})
	}
}

// TestRunning_LateHostAnswerNeverApprovesNextTurn (docs/rules.md#r27): turn
// t1's escalated permission is left unanswered and t1 is cancelled (the
// agent is answered "cancelled"); during t2 the host sends a late
// "allow-once" for t1's request and then "reject-once" for t2's: the agent
// sees exactly the rejection, and no permission is ever audited "approved".
func TestRunning_LateHostAnswerNeverApprovesNextTurn(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	asks := make(chan *frame, 4)
	s.onRequest = func(f *frame) any { asks <- f; return nil }
	s.initialize(true)
	o := seedMustOpen(s, e.openParams("authority", "permission=execute"))
	nextAsk := func(rid string) *frame {
		select {
		case f := <-asks:
			var p struct {
				RequestID string `json:"requestId"`
			}
			_ = json.Unmarshal(f.Params, &p)
			if f.Method != "session/requestPermission" || p.RequestID != rid {
				t.Fatalf("host request %s %s, want session/requestPermission for %s", f.Method, f.Params, rid)
			}
			return f
		case <-time.After(20 * time.Second):
			t.Fatalf("no permission request for %s", rid)
		}
		return nil
	}
	t1 := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "one"})
	ask1 := nextAsk("t1")
	s.mustCall("session/cancel", map[string]any{"session": o.Session, "requestId": "t1"}, nil)
	if r := decodeResult[turnResult](t, "t1", s.await(t1, 20*time.Second)); r.Status != "cancelled" {
		t.Errorf("t1 %+v, want cancelled", r)
	}
	t2 := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "two"})
	ask2 := nextAsk("t2")
	s.send(map[string]any{"jsonrpc": "2.0", "id": ask1.ID, "result": map[string]any{"outcome": "selected", "optionId": "allow-once"}})
	s.send(map[string]any{"jsonrpc": "2.0", "id": ask2.ID, "result": map[string]any{"outcome": "selected", "optionId": "reject-once"}})
	if r := decodeResult[turnResult](t, "t2", s.await(t2, 20*time.Second)); r.Status != "completed" {
		t.Errorf("t2 %+v, want completed", r)
	}
	texts := map[string][]string{}
	for _, u := range updatesOf(s, o.Session) {
		var c struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(u.Update, &c)
		if u.RequestID != nil && strings.HasPrefix(c.Content.Text, "permission:") {
			texts[*u.RequestID] = append(texts[*u.RequestID], c.Content.Text)
		}
	}
	if got := fmt.Sprint(texts["t1"]); got != "[permission: cancelled]" {
		t.Errorf("agent's t1 permission outcome %s, want [permission: cancelled]", got)
	}
	if got := fmt.Sprint(texts["t2"]); got != "[permission: selected reject-once]" {
		t.Errorf("agent's t2 permission outcome %s, want [permission: selected reject-once] (a late t1 answer must not decide t2)", got)
	}
	for _, n := range s.notesOf("session/permission") {
		if strings.Contains(string(n.Params), `"decision":"approved"`) {
			t.Errorf("a permission was approved: %s", n.Params)
		}
	}
	seedCloseProof(t, s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestPermission_ApproveReadsByKind: the default permissionMode
// approve-reads approves kind read and escalates execute, which without a
// host follows nonInteractivePermissions: deny refuses, fail fails the turn
// with PERMISSION_APPROVAL_REQUIRED (docs/protocol.md, session/open
// permissionMode and nonInteractivePermissions).
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

// TestPermission_KindInferredFromTitle: a request whose toolCall has no kind
// but the title "Read file foo" is treated as kind read, so approve-reads
// approves it (the kind is inferred from the title when missing).
func TestPermission_KindInferredFromTitle(t *testing.T) {
	runFaultPermCases(t, []faultPermCase{
		{name: "title-read", modes: "permission-title=Read file foo",
			wantChunk: "permission: selected allow-once", decision: "approved", kind: "read", rule: "permissionMode:approve-reads"},
	})
}

// TestPermission_PolicyRules: permissionPolicy is evaluated before
// permissionMode; autoDeny beats autoApprove for the same kind; autoApprove
// and escalate apply to listed kinds; defaultAction applies to kinds not
// listed (docs/protocol.md, session/open permissionPolicy).
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
