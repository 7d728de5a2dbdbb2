package adapter

import (
	"encoding/json"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestBinding_NeedsAskingUnlessPlainApproveAll: only approve-all without a
// deny or escalate rule may run an agent that decides alone (docs/agents.md).
func TestBinding_NeedsAskingUnlessPlainApproveAll(t *testing.T) {
	for _, c := range []struct {
		name string
		p    protocol.OpenParams
		want bool
	}{
		{"default approve-reads", protocol.OpenParams{}, true},
		{"deny-all", protocol.OpenParams{PermissionMode: "deny-all"}, true},
		{"approve-all", protocol.OpenParams{PermissionMode: "approve-all"}, false},
		{"approve-all escalating execute", protocol.OpenParams{PermissionMode: "approve-all",
			PermissionPolicy: &protocol.PermissionPolicy{Escalate: []string{"execute"}}}, true},
		{"approve-all denying delete", protocol.OpenParams{PermissionMode: "approve-all",
			PermissionPolicy: &protocol.PermissionPolicy{AutoDeny: []string{"delete"}}}, true},
		{"defaultAction approve over deny-all", protocol.OpenParams{PermissionMode: "deny-all",
			PermissionPolicy: &protocol.PermissionPolicy{DefaultAction: "approve"}}, false},
		{"defaultAction escalate", protocol.OpenParams{PermissionMode: "approve-all",
			PermissionPolicy: &protocol.PermissionPolicy{DefaultAction: "escalate"}}, true},
	} {
		if got := needsAsking(c.p); got != c.want {
			t.Errorf("%s: needsAsking = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestBinding_AutonomousHostModeRefusedUnlessApproveAll: a host mode in
// which the agent decides alone is PERMISSION_POLICY_UNENFORCEABLE under a
// policy that needs asking, and allowed under approve-all; asking modes and
// env-bound profiles are always allowed.
func TestBinding_AutonomousHostModeRefusedUnlessApproveAll(t *testing.T) {
	codex, _ := profiles.Lookup("codex")
	claude, _ := profiles.Lookup("claude")
	opencode, _ := profiles.Lookup("opencode")
	deny := protocol.OpenParams{PermissionMode: "deny-all"}
	all := protocol.OpenParams{PermissionMode: "approve-all"}
	for _, c := range []struct {
		prof    profiles.Profile
		p       protocol.OpenParams
		mode    string
		refused bool
	}{
		{codex, deny, "agent", true},
		{codex, deny, "agent-full-access", true},
		{codex, deny, "read-only", false},
		{codex, deny, "", false},
		{codex, all, "agent", false},
		{claude, deny, "auto", true},
		{claude, deny, "bypassPermissions", true},
		{claude, deny, "default", false},
		{opencode, deny, "build", false},
	} {
		e := checkHostMode(c.prof, c.p, c.mode)
		if (e != nil) != c.refused {
			t.Errorf("%s mode %q %s: refused = %v, want %v", c.prof.Name, c.mode, c.p.PermissionMode, e != nil, c.refused)
		}
		if e != nil && e.Data.Code != protocol.ErrPolicyUnenforceable {
			t.Errorf("%s mode %q: code %s", c.prof.Name, c.mode, e.Data.Code)
		}
	}
}

// TestModels_SplitEffort: codex-acp 2.x ids "base[effort]" split; others
// do not.
func TestModels_SplitEffort(t *testing.T) {
	for id, want := range map[string][3]string{
		"gpt-5.5[medium]": {"gpt-5.5", "medium", "true"},
		"gpt-5.5":         {"", "", "false"},
		"[x]":             {"", "", "false"},
		"a[]":             {"", "", "false"},
		"a[b":             {"", "", "false"},
	} {
		b, e, ok := splitEffort(id)
		if b != want[0] || e != want[1] || (ok && want[2] != "true") || (!ok && want[2] != "false") {
			t.Errorf("splitEffort(%q) = %q %q %v, want %v", id, b, e, ok, want)
		}
	}
}

// TestModels_ListedModelIDFromOptions: a config_option_update that says
// model "gpt-5.5" and effort "high" is the listed "gpt-5.5[high]"
// (codex-acp 2.x), so status never reports an id the agent does not list.
func TestModels_ListedModelIDFromOptions(t *testing.T) {
	opts := []json.RawMessage{
		json.RawMessage(`{"id":"model","category":"model","type":"select","currentValue":"gpt-5.5","options":[{"value":"gpt-5.5"}]}`),
		json.RawMessage(`{"id":"reasoning_effort","category":"thought_level","type":"select","currentValue":"high","options":[{"value":"low"},{"value":"high"}]}`),
	}
	listed := []string{"gpt-5.5[low]", "gpt-5.5[high]"}
	if got := listedModelID(opts, "gpt-5.5", listed); got != "gpt-5.5[high]" {
		t.Errorf("listedModelID = %q, want gpt-5.5[high]", got)
	}
	if got := listedModelID(opts, "other", listed); got != "other" {
		t.Errorf("unlisted value: %q", got)
	}
	if got := listedModelID(nil, "fa-model", []string{"fa-model"}); got != "fa-model" {
		t.Errorf("listed value: %q", got)
	}
}

// TestUpdates_LateToolCallUpdateKeepsItsTurn: a tool_call_update for a
// call that started in turn t1 and arrives during t2 (or between turns)
// is attributed to t1; one of the running turn's own calls is not.
func TestUpdates_LateToolCallUpdateKeepsItsTurn(t *testing.T) {
	s := &session{turns: turnState{toolTurns: map[string]string{}, turn: &turn{requestID: "t1"}}}
	if rid := trackRaw(s, `{"sessionUpdate":"tool_call","toolCallId":"call_8","status":"in_progress"}`); rid != nil {
		t.Fatalf("a new tool call is the running turn's: got %q", *rid)
	}
	s.turns.turn = &turn{requestID: "t2"}
	if rid := trackRaw(s, `{"sessionUpdate":"tool_call","toolCallId":"call_9"}`); rid != nil {
		t.Fatalf("t2's own call attributed to %q", *rid)
	}
	if rid := trackRaw(s, `{"sessionUpdate":"tool_call_update","toolCallId":"call_9","status":"completed"}`); rid != nil {
		t.Fatalf("t2's own update attributed to %q", *rid)
	}
	rid := trackRaw(s, `{"sessionUpdate":"tool_call_update","toolCallId":"call_8","status":"completed"}`)
	if rid == nil || *rid != "t1" {
		t.Fatalf("late update of t1's call: %v, want t1", rid)
	}
	if _, kept := s.turns.toolTurns["call_8"]; kept {
		t.Errorf("a completed call is still tracked")
	}
}

// trackRaw runs trackUpdate on an update given as JSON text, its kind read
// as the line scan reads it.
func trackRaw(s *session, update string) *string {
	kind, _ := jsonl.TopString([]byte(update), "sessionUpdate")
	return s.trackUpdate(kindOf(kind), json.RawMessage(update))
}
