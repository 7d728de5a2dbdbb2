package protocol

import (
	"encoding/json"
	"testing"
)

// TestExt_Validate: the params of docs/protocol.md §23 are refused with
// the field named, and accepted when well formed.
func TestExt_Validate(t *testing.T) {
	bad := []struct {
		v     interface{ Validate() *Error }
		field string
	}{
		{&ExtRequestParams{Session: "s-1", Method: "session/prompt"}, "method"},
		{&ExtRequestParams{Session: "s-1", Method: "_"}, "method"},
		{&ExtRequestParams{Session: "s-1", Method: "_x", Params: json.RawMessage(`"str"`)}, "params"},
		{&AgentSessionsParams{Session: "s-1", Cwd: "rel"}, "cwd"},
		{&PromptParams{Session: "s-1", RequestID: "t", Prompt: json.RawMessage(`"hi"`), Meta: json.RawMessage(`[1]`)}, "_meta"},
	}
	for _, b := range bad {
		if e := b.v.Validate(); e == nil || e.Data.Field != b.field {
			t.Errorf("%+v: %v, want -32602 field %s", b.v, e, b.field)
		}
	}
	empty := ""
	for _, p := range []OpenParams{
		{AuthMethod: &empty}, {AgentSessionID: &empty}, {AdditionalDirectories: []string{"rel"}}, {Meta: json.RawMessage(`"x"`)},
	} {
		if e := p.validateExt(); e == nil || e.RPCCode != CodeInvalidParams {
			t.Errorf("%+v: %v, want -32602", p, e)
		}
	}
	good := []interface{ Validate() *Error }{
		&ExtRequestParams{Session: "s-1", Method: "_x/y", Params: json.RawMessage(`{"a":1}`)},
		&ExtRequestParams{Session: "s-1", Method: "_x/y", Params: json.RawMessage(`[1]`)},
		&AgentSessionsParams{Session: "s-1", Cwd: "/w"},
	}
	for _, g := range good {
		if e := g.Validate(); e != nil {
			t.Errorf("%+v: %v", g, e)
		}
	}
	p := ExtRequestParams{Session: "s-1", Method: "_x", Params: json.RawMessage("null")}
	if e := p.Validate(); e != nil || p.Params != nil {
		t.Errorf("null params: %v, params %s, want none", e, p.Params)
	}
}
