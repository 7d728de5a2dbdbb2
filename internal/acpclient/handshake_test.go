package acpclient

import (
	"encoding/json"
	"testing"
)

// TestAgentMsg_CancelledID: a well-formed $/cancel_request yields its
// requestId in the form the pending requests are keyed by; anything else
// yields "".
func TestAgentMsg_CancelledID(t *testing.T) {
	for _, tc := range []struct {
		msg  AgentMsg
		want string
	}{
		{AgentMsg{Method: MethodCancelRequest, Params: json.RawMessage(`{"requestId":7}`)}, `7`},
		{AgentMsg{Method: MethodCancelRequest, Params: json.RawMessage(`{"requestId":"s-1"}`)}, `"s-1"`},
		{AgentMsg{Method: MethodCancelRequest, Params: json.RawMessage(`{"requestId":7}`), Malformed: "bad envelope"}, ``},
		{AgentMsg{Method: MethodCancelRequest, Params: json.RawMessage(`{"requestId":{"a":1}}`)}, ``},
		{AgentMsg{Method: MethodCancelRequest, Params: json.RawMessage(`{}`)}, ``},
		{AgentMsg{Method: MethodCancelRequest, Params: json.RawMessage(`[7]`)}, ``},
		{AgentMsg{Method: MethodElicitationComplete, Params: json.RawMessage(`{"requestId":7}`)}, ``},
	} {
		if got := tc.msg.CancelledID(); got != tc.want {
			t.Errorf("%s %s (malformed %q): %q, want %q", tc.msg.Method, tc.msg.Params, tc.msg.Malformed, got, tc.want)
		}
	}
}

// TestInitializeResult_Caps: what the agent advertises is decoded; an
// absent or unreadable agentCapabilities reads as nothing advertised.
func TestInitializeResult_Caps(t *testing.T) {
	var r InitializeResult
	if err := json.Unmarshal([]byte(`{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"sessionCapabilities":{"close":{}}}}`), &r); err != nil {
		t.Fatal(err)
	}
	if c := r.Caps(); !c.LoadSession || c.SessionCapabilities.Close == nil || c.SessionCapabilities.Resume != nil {
		t.Errorf("caps %+v", c)
	}
	for _, raw := range []string{``, `[]`, `"x"`} {
		r := InitializeResult{AgentCapabilities: json.RawMessage(raw)}
		if c := r.Caps(); c.LoadSession || c.SessionCapabilities.Close != nil {
			t.Errorf("agentCapabilities %q: caps %+v, want none", raw, c)
		}
	}
}
