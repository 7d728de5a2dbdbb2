package rpc

import (
	"encoding/json"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestPermissionAnswer_BothShapesAndNothingElse (docs/protocol.md §9; issue
// 33): the flat answer and ACP's nested one select or cancel; every other
// answer is refused -32602 naming the member at fault — never read as a
// cancel.
func TestPermissionAnswer_BothShapesAndNothingElse(t *testing.T) {
	for _, c := range []struct {
		raw   string
		want  protocol.PermissionRequestResult
		field string // refused when set
	}{
		{raw: `{"outcome":"selected","optionId":"allow-once"}`, want: protocol.PermissionRequestResult{Outcome: protocol.AskSelected, OptionID: "allow-once"}},
		{raw: `{"outcome":"cancelled"}`, want: protocol.PermissionRequestResult{Outcome: protocol.AskCancelled}},
		{raw: `{"outcome":{"outcome":"selected","optionId":"allow-once"}}`, want: protocol.PermissionRequestResult{Outcome: protocol.AskSelected, OptionID: "allow-once"}},
		{raw: `{"outcome":{"outcome":"cancelled"},"_meta":{"x":1}}`, want: protocol.PermissionRequestResult{Outcome: protocol.AskCancelled}},
		{raw: `{"outcome":"maybe"}`, field: "outcome"},
		{raw: `{"outcome":{"outcome":"maybe"}}`, field: "outcome.outcome"},
		{raw: `{"outcome":"selected"}`, field: "optionId"},
		{raw: `{"outcome":{"outcome":"selected"}}`, field: "outcome.optionId"},
		{raw: `{}`, field: "outcome"},
		{raw: `[]`, field: "result"},
		{raw: `null`, field: "result"},
		{raw: `{"outcome":7}`, field: "outcome"},
		{raw: `{"Outcome":"selected","optionId":"allow-once"}`, field: "Outcome"},
		{raw: `{"outcome":{"outcome":"selected","OptionID":"a"}}`, field: "outcome.OptionID"},
		{raw: `{"outcome":"selected","optionId":"a","optionId":"b"}`, field: "optionId"},
	} {
		got, e := parsePermissionAnswer(json.RawMessage(c.raw))
		switch {
		case c.field == "" && (e != nil || got != c.want):
			t.Errorf("%s: %+v %v, want %+v", c.raw, got, e, c.want)
		case c.field != "" && (e == nil || e.RPCCode != protocol.CodeInvalidParams):
			t.Errorf("%s: %+v %v, want refused -32602", c.raw, got, e)
		case c.field != "" && e.Data.Field != c.field:
			t.Errorf("%s: refused naming %q, want %q (%s)", c.raw, e.Data.Field, c.field, e.Message)
		}
	}
}
