package client

import (
	"context"
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// ElicitationModes are the ACP elicitation modes a host answers
// (initialize.capabilities.elicitation, docs/protocol.md §22): the
// sidecar offers agents exactly these.
type ElicitationModes = protocol.ElicitationCaps

// ElicitationRequest is the sidecar's session/elicitation request: the
// agent's ACP elicitation/create params (Elicitation verbatim; Mode,
// Message, RequestedSchema, URL and ElicitationID read from it for
// convenience). RequestID is the turn's id.
type ElicitationRequest struct {
	// Session is the sidecar session whose agent asks.
	Session string `json:"session"`
	// RequestID is the id of the turn the elicitation belongs to.
	RequestID string `json:"requestId"`
	// Elicitation is the agent's elicitation/create params verbatim.
	Elicitation json.RawMessage `json:"elicitation"`

	// Mode is "form" or "url".
	Mode string `json:"-"`
	// Message is the agent's question for the user.
	Message string `json:"-"`
	// RequestedSchema is the form's JSON Schema (form mode).
	RequestedSchema json.RawMessage `json:"-"`
	// URL is the page the user is asked to open (url mode).
	URL string `json:"-"`
	// ElicitationID names the url interaction; an ElicitationComplete
	// carries it when the interaction is done ("" in form mode).
	ElicitationID string `json:"-"`
}

// ElicitationResponse is the host's answer, ACP CreateElicitationResponse:
// make it with Accept, Decline or CancelElicitation. The zero value is
// sent as cancel. An accepted form's Content must match the requested
// schema, else the agent is answered cancel and the refusal is reported
// in the ElicitationDecided notice (Error, -32602).
type ElicitationResponse struct {
	// Action is "accept", "decline" or "cancel" ("" is sent as cancel).
	Action string `json:"action"`
	// Content is an accepted form's values, a JSON object (nil otherwise;
	// never forwarded for a url elicitation).
	Content json.RawMessage `json:"content,omitempty"`
}

// Accept answers with action "accept" and the form's values (nil for a
// url elicitation: the user consented to open it).
func Accept(content json.RawMessage) ElicitationResponse {
	return ElicitationResponse{Action: string(protocol.ElicitAccept), Content: content}
}

// Decline answers with action "decline": the user said no.
func Decline() ElicitationResponse {
	return ElicitationResponse{Action: string(protocol.ElicitDecline)}
}

// CancelElicitation answers with action "cancel": dismissed.
func CancelElicitation() ElicitationResponse {
	return ElicitationResponse{Action: string(protocol.ElicitCancel)}
}

// ElicitationDecided is a session/elicitationDecided audit notice: Action
// is what the agent was answered ("accept", "decline", "cancel"),
// "withdrawn" (the agent withdrew it) or "refused" (the agent got an
// error, the host was not asked); Rule who decided ("host", "turn ended",
// "elicitationTimeoutMs", …); Error the refusal of the host's answer.
type ElicitationDecided = protocol.ElicitationDecided

// ElicitationComplete is a session/elicitationComplete notice: the agent
// finished the url interaction ElicitationID names.
type ElicitationComplete = protocol.ElicitationComplete

// elicitTool is the toolCallID of an elicitation's permKey: elicitations
// share the permission asks' settling (settle.go) by session and turn.
const elicitTool = "\x00elicitation"

// elicitationModes is what Initialize declares: Options.ElicitationModes,
// or both modes when OnElicitation is set.
func (c *Client) elicitationModes() *ElicitationModes {
	if m := c.opts.ElicitationModes; m != nil {
		if !m.Form && !m.URL {
			return nil
		}
		return m
	}
	if c.opts.OnElicitation != nil {
		return &ElicitationModes{Form: true, URL: true}
	}
	return nil
}

// answerElicitation answers session/elicitation through
// Options.OnElicitation (cancel without it).
func (c *Client) answerElicitation(hctx context.Context, params json.RawMessage) ElicitationResponse {
	var req ElicitationRequest
	if c.opts.OnElicitation == nil || json.Unmarshal(params, &req) != nil {
		return CancelElicitation()
	}
	var e struct {
		Mode            string          `json:"mode"`
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
		URL             string          `json:"url"`
		ElicitationID   string          `json:"elicitationId"`
	}
	_ = json.Unmarshal(req.Elicitation, &e)
	req.Mode, req.Message, req.RequestedSchema, req.URL, req.ElicitationID = e.Mode, e.Message, e.RequestedSchema, e.URL, e.ElicitationID
	out := c.opts.OnElicitation(hctx, req)
	if out.Action == "" {
		out = CancelElicitation()
	}
	return out
}

// onElicitationNotice handles session/elicitationDecided and
// session/elicitationComplete.
func (c *Client) onElicitationNotice(method string, params json.RawMessage) {
	switch method {
	case "session/elicitationDecided":
		var d ElicitationDecided
		if json.Unmarshal(params, &d) != nil {
			return
		}
		// A decision ends its handler through the sidecar's
		// $/cancelRequest of that very request (by id), which follows an
		// elicitationTimeoutMs decision at once: the notice names no
		// request, and several elicitations of one turn may reach the
		// host in another order than their bounds run out (settling "the
		// oldest" ended the wrong one's handler; a CI flake).
		if f := c.opts.OnElicitationDecided; f != nil {
			c.cb.events.push(func() { f(d) })
		}
	case "session/elicitationComplete":
		var n ElicitationComplete
		if f := c.opts.OnElicitationComplete; f != nil && json.Unmarshal(params, &n) == nil {
			c.cb.events.push(func() { f(n) })
		}
	}
}

// onCancelRequest handles the sidecar's $/cancelRequest {"id"}: the agent
// withdrew the request the sidecar had put to this host, so that
// request's handler context ends (its answer is ignored).
func (c *Client) onCancelRequest(params json.RawMessage) {
	var p struct {
		ID *jsonrpc2.ID `json:"id"`
	}
	if json.Unmarshal(params, &p) != nil || p.ID == nil {
		return
	}
	c.cb.asks.settleID(idJSON(*p.ID))
}

// idJSON is a JSON-RPC id as JSON text.
func idJSON(id jsonrpc2.ID) string {
	b, _ := json.Marshal(id)
	return string(b)
}

// elicitRequestKey reads the key of a session/elicitation request.
func elicitRequestKey(params json.RawMessage) permKey {
	var r struct {
		Session   string  `json:"session"`
		RequestID *string `json:"requestId"`
	}
	_ = json.Unmarshal(params, &r)
	return permKey{r.Session, deref(r.RequestID), elicitTool}
}
