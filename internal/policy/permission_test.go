package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestPermission_ShellCommandsAreExecuteWhateverTheLabel: a tool call with
// a shell command in rawInput is judged "execute" even when the agent
// labels it a read or search (codex-acp 0.16 labels `find . -delete`
// "search"), so approve-reads never approves it; other kinds stay.
func TestPermission_ShellCommandsAreExecuteWhateverTheLabel(t *testing.T) {
	for _, c := range []struct {
		call string
		want string
	}{
		{`{"kind":"search","title":"find . -delete","rawInput":{"command":["bash","-lc","find . -delete"]}}`, "execute"},
		{`{"kind":"read","title":"cat a | tee b","rawInput":{"cmd":"cat a | tee b"}}`, "execute"},
		{`{"title":"Read file","rawInput":{"command":"cat /etc/passwd"}}`, "execute"},
		{`{"kind":"read","title":"Read a.txt","rawInput":{"file_path":"a.txt"}}`, "read"},
		{`{"kind":"edit","title":"Edit","rawInput":{"command":"str_replace"}}`, "edit"},
		{`{"kind":"search","title":"grep","rawInput":{"command":""}}`, "search"},
	} {
		var h ToolCallHead
		if err := json.Unmarshal([]byte(c.call), &h); err != nil {
			t.Fatal(err)
		}
		if got := Kind(h); got != c.want {
			t.Errorf("%s: policy kind %q, want %q", c.call, got, c.want)
		}
	}
}

// TestInferKind: a title without a kind is read for the first matching
// group of words, in order read, delete, move, edit, search, fetch,
// execute (docs/protocol.md §10); a title matching none is "other".
func TestInferKind(t *testing.T) {
	for _, c := range []struct{ title, want string }{
		{"Read a.txt", "read"},
		{"View README", "read"},
		{"cat notes", "read"},
		{"Edit thread.go", "read"}, // "thread" holds "read": read is tried first
		{"Delete build/", "delete"},
		{"Remove file", "delete"},
		{"rm -rf /tmp/x", "delete"},
		{"Move a to b", "move"},
		{"Rename x", "move"},
		{"Edit main.go", "edit"},
		{"Write out.txt", "edit"},
		{"Apply patch", "edit"},
		{"Search for TODO", "search"},
		{"grep -n foo", "search"},
		{"Find files", "search"},
		{"Fetch example.com", "fetch"},
		{"GET https://example.com", "fetch"},
		{"Run tests", "execute"},
		{"Execute make", "execute"},
		{"Shell", "execute"},
		{"Terminal command", "execute"},
		{"", "other"},
		{"Think", "other"},
		{"firm", "other"},
	} {
		if got := inferKind(c.title); got != c.want {
			t.Errorf("inferKind(%q) = %q, want %q", c.title, got, c.want)
		}
	}
}

// TestKind_AgentKindInferredAndShellCommands: the agent's kind is judged
// when it is an ACP ToolKind, else the title's; a command in rawInput
// turns only a read kind or "other" into "execute".
func TestKind_AgentKindInferredAndShellCommands(t *testing.T) {
	cmd := map[string]json.RawMessage{"command": json.RawMessage(`"rm -rf /"`)}
	for _, c := range []struct {
		head ToolCallHead
		want string
	}{
		{ToolCallHead{Kind: "edit", Title: "Read a"}, "edit"},
		{ToolCallHead{Kind: "bogus", Title: "Edit a"}, "edit"},
		{ToolCallHead{Kind: "", Title: ""}, "other"},
		{ToolCallHead{Kind: "READ", Title: "Delete a"}, "delete"},
		{ToolCallHead{Kind: "think", RawInput: cmd}, "execute"},
		{ToolCallHead{Kind: "other", RawInput: cmd}, "execute"},
		{ToolCallHead{Title: "Look around", RawInput: cmd}, "execute"},
		{ToolCallHead{Kind: "delete", RawInput: cmd}, "delete"},
		{ToolCallHead{Kind: "fetch", RawInput: cmd}, "fetch"},
		{ToolCallHead{Kind: "read", RawInput: map[string]json.RawMessage{"cmd": json.RawMessage(`null`)}}, "read"},
		{ToolCallHead{Kind: "read", RawInput: map[string]json.RawMessage{"cmd": json.RawMessage(`[]`)}}, "execute"},
		{ToolCallHead{Kind: "execute"}, "execute"},
	} {
		if got := Kind(c.head); got != c.want {
			t.Errorf("Kind(%+v) = %q, want %q", c.head, got, c.want)
		}
	}
}

// TestDecide: permissionPolicy is evaluated before permissionMode —
// autoDeny, autoApprove, escalate, then defaultAction — and the mode
// decides what it leaves; any mode but approve-all and deny-all is
// approve-reads (docs/protocol.md §10).
func TestDecide(t *testing.T) {
	pol := &protocol.PermissionPolicy{AutoDeny: []string{"delete", "edit"}, AutoApprove: []string{"edit", "read"}, Escalate: []string{"read", "fetch"}}
	withDefault := &protocol.PermissionPolicy{AutoApprove: []string{"read"}, DefaultAction: "deny"}
	for _, c := range []struct {
		name   string
		p      protocol.OpenParams
		kind   string
		action protocol.PermissionAction
		rule   string
	}{
		{"autoDeny first", protocol.OpenParams{PermissionMode: "approve-all", PermissionPolicy: pol}, "edit", Deny, "permissionPolicy.autoDeny"},
		{"autoApprove before escalate", protocol.OpenParams{PermissionPolicy: pol}, "read", Approve, "permissionPolicy.autoApprove"},
		{"escalate", protocol.OpenParams{PermissionMode: "approve-all", PermissionPolicy: pol}, "fetch", Escalate, "permissionPolicy.escalate"},
		{"no rule: the mode", protocol.OpenParams{PermissionMode: "deny-all", PermissionPolicy: pol}, "search", Deny, "permissionMode:deny-all"},
		{"defaultAction", protocol.OpenParams{PermissionMode: "approve-all", PermissionPolicy: withDefault}, "execute", Deny, "permissionPolicy.defaultAction"},
		{"defaultAction after lists", protocol.OpenParams{PermissionPolicy: withDefault}, "read", Approve, "permissionPolicy.autoApprove"},
		{"empty policy", protocol.OpenParams{PermissionMode: "approve-all", PermissionPolicy: &protocol.PermissionPolicy{}}, "delete", Approve, "permissionMode:approve-all"},
		{"approve-all", protocol.OpenParams{PermissionMode: "approve-all"}, "execute", Approve, "permissionMode:approve-all"},
		{"deny-all", protocol.OpenParams{PermissionMode: "deny-all"}, "read", Deny, "permissionMode:deny-all"},
		{"approve-reads read", protocol.OpenParams{PermissionMode: "approve-reads"}, "read", Approve, "permissionMode:approve-reads"},
		{"approve-reads search", protocol.OpenParams{PermissionMode: "approve-reads"}, "search", Approve, "permissionMode:approve-reads"},
		{"approve-reads think", protocol.OpenParams{PermissionMode: "approve-reads"}, "think", Approve, "permissionMode:approve-reads"},
		{"approve-reads edit", protocol.OpenParams{PermissionMode: "approve-reads"}, "edit", Escalate, "permissionMode:approve-reads"},
		{"approve-reads other", protocol.OpenParams{PermissionMode: "approve-reads"}, "other", Escalate, "permissionMode:approve-reads"},
		{"no mode is approve-reads", protocol.OpenParams{}, "search", Approve, "permissionMode:approve-reads"},
		{"no mode escalates the rest", protocol.OpenParams{}, "execute", Escalate, "permissionMode:approve-reads"},
	} {
		if action, rule := Decide(c.p, c.kind); action != c.action || rule != c.rule {
			t.Errorf("%s: Decide(%s) = %q, %q; want %q, %q", c.name, c.kind, action, rule, c.action, c.rule)
		}
	}
}

// TestPickOption: the first kind asked for that an option has wins, in
// the order of kinds, whatever the options' order; none: "".
func TestPickOption(t *testing.T) {
	opts := []Option{{"aa", "allow_always"}, {"ro", "reject_once"}, {"ao", "allow_once"}, {"ra", "reject_always"}}
	for _, c := range []struct {
		opts  []Option
		kinds []string
		want  string
	}{
		{opts, []string{"allow_once", "allow_always"}, "ao"},
		{opts, []string{"allow_always", "allow_once"}, "aa"},
		{opts, []string{"reject_once", "reject_always"}, "ro"},
		{opts[:1], []string{"allow_once", "allow_always"}, "aa"},
		{opts[:1], []string{"reject_once", "reject_always"}, ""},
		{nil, []string{"allow_once"}, ""},
		{opts, nil, ""},
		{[]Option{{"x", "allow_once"}, {"y", "allow_once"}}, []string{"allow_once"}, "x"},
	} {
		if got := PickOption(c.opts, c.kinds...); got != c.want {
			t.Errorf("PickOption(%v, %v) = %q, want %q", c.opts, c.kinds, got, c.want)
		}
	}
	if got := ApproveOption(opts); got != "ao" {
		t.Errorf("ApproveOption = %q, want ao", got)
	}
	if got := RejectOption(opts); got != "ro" {
		t.Errorf("RejectOption = %q, want ro", got)
	}
	if got := RejectOption([]Option{{"a", "allow_once"}, {"r", "reject_always"}}); got != "r" {
		t.Errorf("RejectOption without reject_once = %q, want r", got)
	}
	if got := ApproveOption([]Option{{"r", "reject_once"}}); got != "" {
		t.Errorf("ApproveOption without an allow option = %q, want \"\"", got)
	}
	if got, none := PickKind(opts, "ra"), PickKind(opts, "zz"); got != "reject_always" || none != "" {
		t.Errorf("PickKind = %q, %q", got, none)
	}
}

// TestUnanswered: nonInteractivePermissions "fail" fails the turn with
// no option; "deny" and the default answer the reject option.
func TestUnanswered(t *testing.T) {
	opts := []Option{{"y", "allow_once"}, {"n", "reject_always"}}
	for _, c := range []struct {
		mode, optionID string
		fail           bool
	}{{"fail", "", true}, {"deny", "n", false}, {"", "n", false}} {
		if id, fail := Unanswered(protocol.OpenParams{NonInteractivePermissions: c.mode}, opts); id != c.optionID || fail != c.fail {
			t.Errorf("%q: Unanswered = %q, %v; want %q, %v", c.mode, id, fail, c.optionID, c.fail)
		}
	}
	if id, fail := Unanswered(protocol.OpenParams{}, opts[:1]); id != "" || fail {
		t.Errorf("no reject option: %q, %v", id, fail)
	}
}

// TestHostAnswer: only a selected optionId the agent offered is answered,
// and it approves only when its kind is an allow kind; anything else
// answers cancelled.
func TestHostAnswer(t *testing.T) {
	opts := []Option{{"y", "allow_once"}, {"always", "allow_always"}, {"n", "reject_once"}}
	for _, c := range []struct {
		name     string
		res      protocol.PermissionRequestResult
		err      error
		optionID string
		approved bool
	}{
		{"allow", protocol.PermissionRequestResult{Outcome: protocol.AskSelected, OptionID: "y"}, nil, "y", true},
		{"allow always", protocol.PermissionRequestResult{Outcome: protocol.AskSelected, OptionID: "always"}, nil, "always", true},
		{"reject", protocol.PermissionRequestResult{Outcome: protocol.AskSelected, OptionID: "n"}, nil, "n", false},
		{"not offered", protocol.PermissionRequestResult{Outcome: protocol.AskSelected, OptionID: "Y"}, nil, "", false},
		{"cancelled", protocol.PermissionRequestResult{Outcome: protocol.AskCancelled, OptionID: "y"}, nil, "", false},
		{"host error", protocol.PermissionRequestResult{Outcome: protocol.AskSelected, OptionID: "y"}, errors.New("gone"), "", false},
	} {
		if id, ok := HostAnswer(opts, c.res, c.err); id != c.optionID || ok != c.approved {
			t.Errorf("%s: HostAnswer = %q, %v; want %q, %v", c.name, id, ok, c.optionID, c.approved)
		}
	}
}

// TestAskAgain: a -32602 refusal of the host's answer asks again, at most
// MaxRefusedAnswers times; any other outcome is final.
func TestAskAgain(t *testing.T) {
	refusal := protocol.InvalidParams("optionId", "bad")
	for _, c := range []struct {
		name    string
		err     error
		refused int
		again   bool
	}{
		{"answered", nil, 0, false},
		{"refused", refusal, 0, true},
		{"refused, wrapped", fmt.Errorf("host: %w", refusal), 1, true},
		{"last refusal allowed", refusal, MaxRefusedAnswers - 1, true},
		{"bound reached", refusal, MaxRefusedAnswers, false},
		{"other rpc error", protocol.Domain(protocol.ErrPermissionRequired, "no", false), 0, false},
		{"plain error", errors.New("closed"), 0, false},
	} {
		pe := AskAgain(c.err, c.refused)
		if (pe != nil) != c.again || pe != nil && pe != refusal {
			t.Errorf("%s: AskAgain(%v, %d) = %v, want again %v", c.name, c.err, c.refused, pe, c.again)
		}
	}
}

// TestOverflows: the count bound is reached at maxN asks waiting; the
// bytes bound only when passed.
func TestOverflows(t *testing.T) {
	for _, c := range []struct {
		waiting, bytes, size, maxN, maxB int
		want                             bool
	}{
		{0, 0, 100, 64, 1024, false},
		{63, 0, 100, 64, 1024, false},
		{64, 0, 100, 64, 1024, true},
		{1, 900, 124, 64, 1024, false},
		{1, 900, 125, 64, 1024, true},
		{0, 0, 1025, 64, 1024, true},
	} {
		if got := Overflows(c.waiting, c.bytes, c.size, c.maxN, c.maxB); got != c.want {
			t.Errorf("Overflows%v = %v, want %v", c, got, c.want)
		}
	}
}

// TestPermissionRequiredError: the turn error names the kind and why.
func TestPermissionRequiredError(t *testing.T) {
	e := PermissionRequiredError("execute", "the host cannot answer")
	if e.Code != protocol.ErrPermissionRequired || e.Message != "a permission of kind execute needs approval and the host cannot answer" {
		t.Errorf("%+v", e)
	}
}

// TestAskKind: an ask's own ToolKind wins; one it leaves out or gives
// outside ACP's ToolKinds is the kind the agent announced for the call,
// and a shell command still makes it "execute".
func TestAskKind(t *testing.T) {
	for _, c := range []struct {
		head      ToolCallHead
		announced string
		want      string
	}{
		{ToolCallHead{Kind: "edit", Title: "Read a"}, "read", "edit"},
		{ToolCallHead{Title: "Read a"}, "delete", "delete"},
		{ToolCallHead{Kind: "bogus", Title: "Read a"}, "fetch", "fetch"},
		{ToolCallHead{Title: "Read a"}, "", "read"},
		{ToolCallHead{RawInput: map[string]json.RawMessage{"command": json.RawMessage(`"rm -rf /"`)}}, "search", "execute"},
	} {
		if got := AskKind(c.head, c.announced); got != c.want {
			t.Errorf("AskKind(%+v, %q) = %q, want %q", c.head, c.announced, got, c.want)
		}
	}
	if got := OverflowRule(2, 4096); got != "more than 2 asks or 4096 bytes waiting for the host (--max-pending-asks, --max-pending-ask-bytes)" {
		t.Errorf("OverflowRule = %q", got)
	}
}
