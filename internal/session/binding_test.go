package session

import (
	"encoding/json"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
)

// TestUpdates_LateToolCallUpdateKeepsItsTurn: a tool_call_update for a
// call that started in turn t1 and arrives during t2 (or between turns)
// is attributed to t1; one of the running turn's own calls is not.
func TestUpdates_LateToolCallUpdateKeepsItsTurn(t *testing.T) {
	s := &Actor{turns: turnState{toolTurns: map[string]string{}, turn: &turn{requestID: "t1"}}}
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
func trackRaw(s *Actor, update string) *string {
	kind, _ := jsonl.TopString([]byte(update), "sessionUpdate")
	return s.trackUpdate(acpclient.KindOf(kind), json.RawMessage(update))
}
