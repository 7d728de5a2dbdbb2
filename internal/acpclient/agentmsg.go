package acpclient

import (
	"context"
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// ACP methods of the agent's that Conn hands to its session as an
// AgentMsg (the ACP v1 schema's clientMethods and protocolMethods,
// testdata/acp and docs/protocol.md §22).
const (
	// MethodElicitationCreate is ACP elicitation/create, a request.
	MethodElicitationCreate = "elicitation/create"
	// MethodElicitationComplete is ACP elicitation/complete, a
	// notification.
	MethodElicitationComplete = "elicitation/complete"
	// MethodCancelRequest is ACP $/cancel_request {"requestId": id}, a
	// notification, in either direction.
	MethodCancelRequest = "$/cancel_request"
)

// CodeRequestCancelled is JSON-RPC's (and ACP's) "request cancelled"
// error code: the answer to a request the agent withdrew
// (docs/protocol.md §22, "Withdrawn requests").
const CodeRequestCancelled = -32800

// AgentMsg is an agent message the session handles beside updates and
// permission requests: an ACP elicitation/create (a request: Reply or
// Fail is called exactly once), elicitation/complete or $/cancel_request
// (notifications: ID is "", Reply and Fail are nil).
type AgentMsg struct {
	// Method is one of MethodElicitationCreate, MethodElicitationComplete,
	// MethodCancelRequest.
	Method string
	// ID is a request's JSON-RPC id as JSON text: the key the agent's
	// $/cancel_request names it by (IDTextRaw).
	ID string
	// Params are the params as the agent sent them (the frame's bytes,
	// not jsonrpc2's re-encoding).
	Params json.RawMessage
	// Malformed is why the frame itself is malformed (an envelope member
	// twice, ...); "" when it is not.
	Malformed string
	// Reply answers the request with result (encoded as JSON).
	Reply func(result any)
	// Fail answers the request with a JSON-RPC error.
	Fail func(code int64, message string)
}

// elicitCancelled is ACP CreateElicitationResponse {"action":"cancel"}:
// the answer to an elicitation/create whose session is gone.
type elicitCancelled struct {
	Action string `json:"action"`
}

// idText is a JSON-RPC id as JSON text: the key the agent's
// $/cancel_request is matched by.
func idText(id jsonrpc2.ID) string {
	b, _ := json.Marshal(id)
	return string(b)
}

// CancelledID is the request id a well-formed $/cancel_request names
// (params {"requestId": id}), in the form of AgentMsg.ID,
// PermissionAsk.ID and ExtEvent.ID (a JSON-RPC id as JSON text: 7 and
// "s" as `7` and `"s"`); "" for any other message, a malformed frame, or
// a requestId that is no JSON-RPC id.
func (m *AgentMsg) CancelledID() string {
	if m.Method != MethodCancelRequest || m.Malformed != "" {
		return ""
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	var id jsonrpc2.ID
	if json.Unmarshal(m.Params, &p) != nil || len(p.RequestID) == 0 || json.Unmarshal(p.RequestID, &id) != nil {
		return ""
	}
	return idText(id)
}

// failer answers request id of conn with a JSON-RPC error.
func (h *acpHandler) failer(conn *jsonrpc2.Conn, id jsonrpc2.ID) func(code int64, message string) {
	return func(code int64, message string) {
		if err := conn.ReplyWithError(context.Background(), id, &jsonrpc2.Error{Code: code, Message: message}); err != nil {
			h.log.Debug("error answer not delivered", zap.Error(err))
		}
	}
}

// agentMessage posts an elicitation/create, elicitation/complete or
// $/cancel_request to the actor and reports true; any other message
// reports false (the caller handles it).
func (h *acpHandler) agentMessage(conn *jsonrpc2.Conn, req *jsonrpc2.Request, params json.RawMessage, malformed string) bool {
	switch {
	case req.Method == MethodElicitationCreate && !req.Notif:
	case (req.Method == MethodElicitationComplete || req.Method == MethodCancelRequest) && req.Notif:
	default:
		return false
	}
	m := &AgentMsg{Method: req.Method, Params: params, Malformed: malformed}
	if !req.Notif {
		id := req.ID
		m.ID, m.Fail = idText(id), h.failer(conn, id)
		m.Reply = func(result any) {
			if err := conn.Reply(context.Background(), id, result); err != nil {
				h.log.Debug("answer not delivered", zap.Error(err))
			}
		}
	}
	if !h.post(Event{AgentMsg: m}) && m.Reply != nil {
		m.Reply(elicitCancelled{Action: string(protocol.ElicitCancel)}) // the session is gone: nobody can answer
	}
	return true
}

// ExtEvent is an agent's `_…` notification (Reply nil) or request
// (docs/protocol.md §23, "Extension methods").
type ExtEvent struct {
	// Method is the agent's method name, `_` first.
	Method string
	// ID is a request's JSON-RPC id as JSON text (IDTextRaw's form): what
	// the agent's $/cancel_request names it by; "" for a notification.
	ID string
	// Params are the params as the agent sent them, cleaned for the host
	// (jsonl.CleanRaw).
	Params json.RawMessage
	// Reply answers the agent's request exactly once: result (nil is sent
	// as null), or err when it is not nil.
	Reply func(result json.RawMessage, err *jsonrpc2.Error)
}

// newExtEvent wraps one `_…` message of the agent (params as it sent them).
func newExtEvent(conn *jsonrpc2.Conn, req *jsonrpc2.Request, params json.RawMessage) *ExtEvent {
	ev := &ExtEvent{Method: req.Method, Params: jsonl.CleanRaw(params)}
	if req.Notif {
		return ev
	}
	id := req.ID
	ev.ID = idText(id)
	ev.Reply = func(result json.RawMessage, err *jsonrpc2.Error) {
		var werr error
		if err != nil {
			werr = conn.ReplyWithError(context.Background(), id, err)
		} else {
			if result == nil {
				result = json.RawMessage("null")
			}
			werr = conn.Reply(context.Background(), id, result)
		}
		_ = werr // the agent is gone: nothing to answer
	}
	return ev
}
