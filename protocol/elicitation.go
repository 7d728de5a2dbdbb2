package protocol

import (
	"encoding/json"
	"errors"
)

// Elicitation and withdrawn requests (docs/protocol.md §22; the ACP
// elicitation of 2026-07-24 and $/cancel_request of 2026-06-29).
const (
	// MethodSessionElicitation is the sidecar → host request that carries
	// an agent's ACP elicitation/create (only to a host that declared
	// capabilities.elicitation).
	MethodSessionElicitation = "session/elicitation"
	// NotifySessionElicitationDecided audits every elicitation outcome.
	NotifySessionElicitationDecided = "session/elicitationDecided"
	// NotifySessionElicitationComplete carries an agent's ACP
	// elicitation/complete.
	NotifySessionElicitationComplete = "session/elicitationComplete"
	// MethodCancelRequestACP is $/cancelRequest spelt the ACP way, with
	// params {"requestId": id}; the host may send either.
	MethodCancelRequestACP = "$/cancel_request"
)

// ElicitAction is an elicitation's action: ACP CreateElicitationResponse's
// (accept, decline, cancel) and the outcomes the sidecar audits besides
// them (ElicitationDecided.Action).
type ElicitAction string

// Elicitation actions.
const (
	// ElicitAccept: the host accepted, with the form's values.
	ElicitAccept ElicitAction = "accept"
	// ElicitDecline: the host declined.
	ElicitDecline ElicitAction = "decline"
	// ElicitCancel: cancelled (by the host, or nobody answered).
	ElicitCancel ElicitAction = "cancel"
	// ElicitRefused: the agent's request was answered with an error
	// (-32601 without the host capability, -32602 for a mode the host did
	// not declare or a malformed request); the host was not asked.
	ElicitRefused ElicitAction = "refused"
	// ElicitWithdrawn is the session/elicitationDecided action of a
	// request the agent withdrew with $/cancel_request (DecisionWithdrawn
	// is the session/permission decision of one).
	ElicitWithdrawn ElicitAction = "withdrawn"
)

// DecisionWithdrawn is the session/permission decision of a request the
// agent withdrew with $/cancel_request: the agent was answered -32800 and
// the host sent $/cancelRequest for its copy.
const DecisionWithdrawn Decision = "withdrawn"

// ErrWithdrawn is the cause a host request's context ends with when the
// request was withdrawn (the agent's $/cancel_request): the host
// connection then sends the host $/cancelRequest {"id": <its id>}
// (docs/protocol.md §22).
var ErrWithdrawn = errors.New("the agent withdrew the request")

// ElicitationCaps is initialize.capabilities.elicitation: the ACP
// elicitation modes the host can answer (docs/protocol.md §22). The
// sidecar advertises exactly these to agents.
type ElicitationCaps struct {
	// Form: the host answers form elicitations (mode "form").
	Form bool `json:"form,omitempty"`
	// URL: the host answers url elicitations (mode "url") and gets
	// session/elicitationComplete.
	URL bool `json:"url,omitempty"`
}

// Any reports whether any mode is declared.
func (c ElicitationCaps) Any() bool { return c.Form || c.URL }

// Allows reports whether ACP elicitation mode mode ("form", "url") is
// declared.
func (c ElicitationCaps) Allows(mode string) bool {
	return mode == "form" && c.Form || mode == "url" && c.URL
}

// ElicitationParams are the params of session/elicitation: Elicitation is
// the agent's ACP elicitation/create params verbatim; RequestID the
// turn's.
type ElicitationParams struct {
	// Session is the id of the session whose agent asks.
	Session string `json:"session"`
	// RequestID is the requestId of the turn the elicitation belongs to
	// (one is only put to the host during a turn).
	RequestID *string `json:"requestId"`
	// Elicitation is the agent's ACP elicitation/create params, verbatim.
	Elicitation json.RawMessage `json:"elicitation"`
}

// ElicitationResult is the host's answer, the ACP CreateElicitationResponse:
// Action "accept" (Content the form's values, checked against the
// requested schema), "decline" or "cancel".
type ElicitationResult struct {
	// Action is ElicitAccept, ElicitDecline or ElicitCancel; anything
	// else is refused and the agent answered cancel.
	Action ElicitAction `json:"action"`
	// Content is an accepted form's values, a JSON object checked against
	// the requested schema; not passed on for a url elicitation.
	Content json.RawMessage `json:"content,omitempty"`
	// Meta is the answer's ACP _meta; the sidecar does not pass it on to
	// the agent.
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// ElicitationDecided is the session/elicitationDecided audit notice.
// Action is what the agent was answered ("accept", "decline", "cancel"),
// "withdrawn" or "refused"; Rule who or what decided ("host", "turn
// ended", "elicitationTimeoutMs", …). Error, on a host answer the sidecar
// refused (content not matching the requested schema), is that refusal:
// code -32602 with data.field naming the first bad member.
type ElicitationDecided struct {
	// Session is the id of the session whose agent asked.
	Session string `json:"session"`
	// RequestID is the requestId of the turn running when it was decided;
	// null outside a turn.
	RequestID *string `json:"requestId"`
	// ElicitationID is a url elicitation's elicitationId; omitted for a
	// form, or when a refused request's was not read.
	ElicitationID string `json:"elicitationId,omitempty"`
	// Mode is the mode the agent asked for ("form", "url"; a refused
	// request's as sent); omitted when it was refused before its mode was
	// read.
	Mode string `json:"mode,omitempty"`
	// Action is the outcome: ElicitAccept, ElicitDecline, ElicitCancel,
	// ElicitWithdrawn or ElicitRefused.
	Action ElicitAction `json:"action"`
	// Rule says who or what decided, e.g. "host", "no active turn",
	// "turn ended", "elicitationTimeoutMs", "host answer refused",
	// "agent $/cancel_request", "malformed: …".
	Rule string `json:"rule"`
	// Error is the -32602 refusal of the host's answer, with rule "host
	// answer refused"; omitted otherwise.
	Error *WireError `json:"error,omitempty"`
}

// WireError is a JSON-RPC error object as it appears inside a
// notification: {code, message, data}.
type WireError struct {
	// Code is the JSON-RPC error code (e.g. -32602).
	Code int `json:"code"`
	// Message is the error's human-readable message.
	Message string `json:"message"`
	// Data is the error's data object, as in a response's error.
	Data ErrorData `json:"data"`
}

// Wire returns e as a WireError.
func (e *Error) Wire() *WireError {
	return &WireError{Code: e.RPCCode, Message: e.Message, Data: e.Data}
}

// ElicitationComplete is session/elicitationComplete: the agent's ACP
// elicitation/complete params (ElicitationID, _meta) for session.
type ElicitationComplete struct {
	// Session is the id of the session whose agent sent it.
	Session string `json:"session"`
	// ElicitationID is the url elicitation the agent says is finished;
	// unknown or already completed ids are the host's to ignore.
	ElicitationID string `json:"elicitationId"`
	// Meta is the agent's _meta object; omitted when it sent none (or
	// one that is not an object).
	Meta json.RawMessage `json:"_meta,omitempty"`
}
