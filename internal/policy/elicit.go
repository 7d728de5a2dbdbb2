package policy

import (
	"encoding/json"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/strictjson"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// ElicitAnswer is ACP CreateElicitationResponse as the sidecar sends it
// to the agent: Action accept, decline or cancel, and an accepted form's
// Content (cleaned, checked against the requested schema).
type ElicitAnswer struct {
	// Action is ACP action: "accept", "decline" or "cancel".
	Action protocol.ElicitAction `json:"action"`
	// Content is ACP content, the accepted form's JSON object; omitted
	// (nil) unless Action is "accept".
	Content json.RawMessage `json:"content,omitempty"`
}

// ElicitCancel is the answer of an elicitation nobody answered (turn end,
// bound, a refused host answer).
var ElicitCancel = ElicitAnswer{Action: protocol.ElicitCancel}

// Elicit is one ACP elicitation/create as the policy read it.
type Elicit struct {
	Mode          string // "form" or "url" (another mode is kept as sent, for the refusal)
	ElicitationID string // url mode's elicitationId
	Form          *Form  // the requested schema (form mode)
	Size          int    // bytes of the ACP params (the turn's pending-ask bound)
}

// elicitKeys are the members of ACP elicitation/create params the sidecar
// reads: a key differing from one only by case makes it malformed.
var elicitKeys = []string{"sessionId", "requestId", "toolCallId", "mode", "message", "requestedSchema", "elicitationId", "url"}

// ParseElicitation decodes ACP elicitation/create params strictly
// (docs/protocol.md §22): a string message, mode "form" with an object
// requestedSchema (compiled, compileForm) or "url" with string url and
// elicitationId; a sessionId, when present, must be backendSessionID (the
// agent's id of the session; "" while it is not known yet, when any is
// taken). why is "" for a well-formed request, else what makes it
// malformed; pe is nil when the params are not a strict object, else it
// holds what was read (Size at least) for the audit.
func ParseElicitation(params json.RawMessage, backendSessionID string) (pe *Elicit, why string) {
	p, why := strictjson.DecodeObject(params, elicitKeys...)
	if why != "" {
		return nil, "params: " + why
	}
	pe = &Elicit{Size: len(params)}
	if _, present, ok := p.Str("message"); !ok || !present {
		return pe, "message is not a string"
	}
	mode, present, ok := p.Str("mode")
	if !ok || !present {
		return pe, "mode is not a string"
	}
	pe.Mode = mode
	// Before the session exists (an agent asking during session/new) its
	// id is not known yet; the request is then answered cancel (no turn).
	if sid, present, ok := p.Str("sessionId"); !ok || present && backendSessionID != "" && sid != backendSessionID {
		return pe, "sessionId is not this session's"
	}
	switch mode {
	case "form":
		rs, ok := p["requestedSchema"]
		if !ok || len(rs) == 0 || rs[0] != '{' {
			return pe, "requestedSchema is not an object"
		}
		f, why := compileForm(rs)
		if why != "" {
			return pe, "requestedSchema: " + why
		}
		pe.Form = f
	case "url":
		id, present, ok := p.Str("elicitationId")
		if !ok || !present || id == "" {
			return pe, "elicitationId is not a string"
		}
		pe.ElicitationID = id
		if u, present, ok := p.Str("url"); !ok || !present || u == "" {
			return pe, "url is not a string"
		}
	}
	return pe, ""
}

// CheckElicitAnswer checks the host's answer to pe (docs/protocol.md
// §22): a known action; an accepted form's content matching the requested
// schema. It returns the answer for the agent, or the -32602 reported to
// the host (in the audit notice), its data.field naming the first bad
// member ("action", "content", "content.<name>").
func CheckElicitAnswer(pe *Elicit, res protocol.ElicitationResult) (ElicitAnswer, *protocol.Error) {
	switch res.Action {
	case protocol.ElicitDecline, protocol.ElicitCancel:
		return ElicitAnswer{Action: res.Action}, nil
	case protocol.ElicitAccept:
	default:
		return ElicitAnswer{}, protocol.InvalidParams("action", "action must be accept, decline or cancel")
	}
	if pe.Form == nil || len(res.Content) == 0 || string(res.Content) == "null" {
		if pe.Form != nil && len(pe.Form.required) > 0 {
			return ElicitAnswer{}, protocol.InvalidParams("content", "content is missing the required "+protocol.QuoteShort(pe.Form.required[0]))
		}
		return ElicitAnswer{Action: protocol.ElicitAccept}, nil
	}
	if field, why := pe.Form.Check(res.Content); why != "" {
		return ElicitAnswer{}, protocol.InvalidParams(field, "content does not match the requested schema: "+why)
	}
	return ElicitAnswer{Action: protocol.ElicitAccept, Content: jsonl.CleanRaw(res.Content)}, nil
}
