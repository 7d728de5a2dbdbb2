package client

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Extension methods and the agent's own sessions (docs/protocol.md §23).

// ExtRequest is an agent's `_…` request as the host gets it
// (session/extRequest): RequestID is the active turn's ("" outside a
// turn), Params the agent's verbatim (nil when it sent none).
type ExtRequest struct {
	// Session is the sidecar session whose agent sent the request.
	Session string
	// RequestID is the active turn's id ("" outside a turn).
	RequestID string
	// Method is the agent's method name, beginning with "_".
	Method string
	// Params are the agent's params verbatim (nil: none).
	Params json.RawMessage
}

// ExtNotification is an agent's `_…` notification
// (session/extNotification): Params verbatim.
type ExtNotification = protocol.ExtNotice

// AgentSessionsPage is one page of the agent's own sessions: the agent's
// ACP session/list result (SessionInfo objects verbatim; NextCursor ""
// on the last page).
type AgentSessionsPage struct {
	// Sessions are the page's ACP SessionInfo objects verbatim.
	Sessions []json.RawMessage `json:"sessions"`
	// NextCursor is the cursor argument of AgentSessions for the next page
	// ("" on the last page).
	NextCursor string `json:"nextCursor,omitempty"`
	// Raw is the whole result as the agent sent it.
	Raw json.RawMessage `json:"-"`
}

// ExtRequest sends the session's agent its `_…` extension request
// method with params (nil: none; else anything that marshals to a JSON
// object or array) and returns the agent's result verbatim. Errors:
// -32602 (field "method") for a method without the `_` prefix, nothing
// sent; AGENT_ERROR for the agent's error (Data holds
// data.agentError, the agent's error object verbatim); SESSION_NOT_FOUND,
// SESSION_CLOSING, PROVIDER_PROCESS_LOST.
func (s *Session) ExtRequest(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p := map[string]any{"session": s.id, "method": method}
	if params != nil {
		p["params"] = params
	}
	var res struct {
		Result json.RawMessage `json:"result"`
	}
	if err := s.c.call(ctx, protocol.MethodSessionExtRequest, p, &res); err != nil {
		return nil, err
	}
	return res.Result, nil
}

// ExtNotify sends the session's agent its `_…` extension notification
// (session/extNotification; the sidecar drops one for a method without
// the prefix or a session that is not open). Errors: the connection's.
func (s *Session) ExtNotify(ctx context.Context, method string, params any) error {
	p := map[string]any{"session": s.id, "method": method}
	if params != nil {
		p["params"] = params
	}
	return s.c.Notify(ctx, protocol.NotifySessionExtNotification, p)
}

// AgentSessions lists one page of the agent's own sessions (ACP
// session/list): cwd (absolute, "" for all) and cursor (the previous
// page's NextCursor, "" for the first) are passed as given. Errors:
// UNSUPPORTED_CONTROL when the agent lacks sessionCapabilities.list,
// AGENT_ERROR for its error. Open one with OpenParams.AgentSessionID.
func (s *Session) AgentSessions(ctx context.Context, cwd, cursor string) (*AgentSessionsPage, error) {
	p := map[string]any{"session": s.id}
	if cwd != "" {
		p["cwd"] = cwd
	}
	if cursor != "" {
		p["cursor"] = cursor
	}
	var raw json.RawMessage
	if err := s.c.call(ctx, protocol.MethodSessionAgentSessions, p, &raw); err != nil {
		return nil, err
	}
	var page AgentSessionsPage
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, newError(protocol.MethodSessionAgentSessions, DataCodeBadResult, err, "the agent's session/list result is not a page: %v", err)
	}
	page.Raw = raw
	return &page, nil
}

// answerExt answers a session/extRequest through Options.OnExtRequest.
func (c *Client) answerExt(hctx, ctx context.Context, conn *jsonrpc2.Conn, id jsonrpc2.ID, params json.RawMessage) {
	var n protocol.ExtRequestNotice
	if err := json.Unmarshal(params, &n); err != nil {
		_ = conn.ReplyWithError(ctx, id, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: "session/extRequest params: " + err.Error()})
		return
	}
	req := ExtRequest{Session: n.Session, Method: n.Method, Params: n.Params}
	if n.RequestID != nil {
		req.RequestID = *n.RequestID
	}
	res, err := c.opts.OnExtRequest(hctx, req)
	if err == nil {
		if res == nil {
			res = json.RawMessage("null")
		}
		_ = conn.Reply(ctx, id, res)
		return
	}
	_ = conn.ReplyWithError(ctx, id, asRPCError(err))
}

// asRPCError is the JSON-RPC error a host callback's err is answered
// with: an *Error with its Code, Message and Data; anything else -32603.
func asRPCError(err error) *jsonrpc2.Error {
	var ce *Error
	if !errors.As(err, &ce) {
		return &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: err.Error()}
	}
	re := &jsonrpc2.Error{Code: int64(ce.Code), Message: ce.Message}
	if len(ce.Data) > 0 {
		data := json.RawMessage(append([]byte(nil), ce.Data...))
		re.Data = &data
	}
	return re
}
