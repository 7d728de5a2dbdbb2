package rpc

import (
	"bytes"
	"encoding/json"

	"github.com/acpx-sidecar/acpx-sidecar/internal/strictjson"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The host's answer to session/requestPermission comes in two shapes
// (docs/protocol.md §9; issue 33): the host protocol's flat
// {"outcome": "selected", "optionId": …} | {"outcome": "cancelled"}, and
// ACP's own RequestPermissionResponse, whose outcome is an object:
// {"outcome": {"outcome": "selected", "optionId": …}}. Both are read as
// strictly as every host frame (member names case-sensitive, each once);
// anything else is refused -32602 naming the member, never taken as a
// cancel.

// flatAnswer is the flat shape; nestedAnswer ACP's.
type flatAnswer struct {
	Outcome  string          `json:"outcome"`
	OptionID string          `json:"optionId"`
	Meta     json.RawMessage `json:"_meta"`
}

type nestedAnswer struct {
	Outcome struct {
		Outcome  string          `json:"outcome"`
		OptionID string          `json:"optionId"`
		Meta     json.RawMessage `json:"_meta"`
	} `json:"outcome"`
	Meta json.RawMessage `json:"_meta"`
}

// parsePermissionAnswer reads a host's answer in either shape. Errors: a
// -32602 *protocol.Error whose data.field names the member at fault
// ("result", "outcome", "outcome.outcome", "optionId",
// "outcome.optionId").
func parsePermissionAnswer(raw json.RawMessage) (protocol.PermissionRequestResult, *protocol.Error) {
	refuse := func(field, why string) (protocol.PermissionRequestResult, *protocol.Error) {
		return protocol.PermissionRequestResult{}, protocol.InvalidParams(field, "the host's answer to session/requestPermission: "+why)
	}
	var probe struct {
		Outcome json.RawMessage `json:"outcome"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil || len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '{' {
		return refuse("result", "it must be an object")
	}
	o := bytes.TrimSpace(probe.Outcome)
	prefix := ""
	var outcome, optionID string
	switch {
	case len(o) > 0 && o[0] == '{':
		var n nestedAnswer
		if e := strictjson.Check(raw, &n); e != nil {
			return refuse(strictField(e), e.Error())
		}
		if err := json.Unmarshal(raw, &n); err != nil {
			return refuse("outcome", "outcome is not ACP's {outcome, optionId}")
		}
		prefix, outcome, optionID = "outcome.", n.Outcome.Outcome, n.Outcome.OptionID
	case len(o) > 0 && o[0] == '"':
		var f flatAnswer
		if e := strictjson.Check(raw, &f); e != nil {
			return refuse(strictField(e), e.Error())
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			return refuse("result", "it does not match its schema")
		}
		outcome, optionID = f.Outcome, f.OptionID
	default:
		return refuse("outcome", `outcome is required: "selected" with optionId, or "cancelled"`)
	}
	switch protocol.AskOutcome(outcome) {
	case protocol.AskSelected:
		if optionID == "" {
			return refuse(prefix+"optionId", "a selected outcome needs an optionId")
		}
		return protocol.PermissionRequestResult{Outcome: protocol.AskSelected, OptionID: optionID}, nil
	case protocol.AskCancelled:
		return protocol.PermissionRequestResult{Outcome: protocol.AskCancelled}, nil
	}
	return refuse(prefix+"outcome", `outcome must be "selected" or "cancelled"`)
}

// strictField is the member a strictjson refusal names ("result" when it
// names none).
func strictField(e error) string {
	if se, ok := e.(*strictjson.Error); ok && se.Path != "" {
		return se.Path
	}
	return "result"
}
