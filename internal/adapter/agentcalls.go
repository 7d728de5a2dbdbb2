package adapter

import (
	"context"
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/policy"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// ACP methods of the agent's this file routes (the ACP v1 schema's
// clientMethods and protocolMethods, testdata/acp and
// docs/protocol.md §22).
const (
	acpElicitationCreate   = "elicitation/create"
	acpElicitationComplete = "elicitation/complete"
	acpCancelRequest       = "$/cancel_request"
)

// codeRequestCancelled is JSON-RPC's (and ACP's) "request cancelled":
// the answer to a request the agent withdrew.
const codeRequestCancelled = -32800

// agentMsg is an agent message the actor handles beside updates and
// permission requests: an ACP elicitation/create (a request: reply or
// fail is called exactly once), elicitation/complete or $/cancel_request
// (notifications).
type agentMsg struct {
	method string
	// id is a request's JSON-RPC id as JSON text (idText).
	id     string
	params json.RawMessage
	// malformed: the frame itself is (an envelope member twice...).
	malformed string
	reply     func(result any)
	fail      func(code int64, message string)
}

// idText is a JSON-RPC id as JSON text: the key the agent's
// $/cancel_request is matched by.
func idText(id jsonrpc2.ID) string {
	b, _ := json.Marshal(id)
	return string(b)
}

// idTextRaw normalizes the JSON value of a $/cancel_request requestId
// to idText's form; "" when it is no JSON-RPC id.
func idTextRaw(raw json.RawMessage) string {
	var id jsonrpc2.ID
	if len(raw) == 0 || json.Unmarshal(raw, &id) != nil {
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
	case req.Method == acpElicitationCreate && !req.Notif:
	case (req.Method == acpElicitationComplete || req.Method == acpCancelRequest) && req.Notif:
	default:
		return false
	}
	m := &agentMsg{method: req.Method, params: params, malformed: malformed}
	if !req.Notif {
		id := req.ID
		m.id, m.fail = idText(id), h.failer(conn, id)
		m.reply = func(result any) {
			if err := conn.Reply(context.Background(), id, result); err != nil {
				h.log.Debug("answer not delivered", zap.Error(err))
			}
		}
	}
	if !h.post(providerEvent{agentMsg: m}) && m.reply != nil {
		m.reply(policy.ElicitCancel) // the session is gone: nobody can answer
	}
	return true
}

// onAgentMsg handles an agentMsg on the actor.
func (s *session) onAgentMsg(m *agentMsg) {
	switch m.method {
	case acpElicitationCreate:
		s.onElicitation(m)
	case acpElicitationComplete:
		s.onElicitationComplete(m)
	case acpCancelRequest:
		if m.malformed != "" {
			return
		}
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.params, &p) == nil {
			s.withdraw(idTextRaw(p.RequestID))
		}
	}
}

// awaitWithdrawal registers what withdraws the host-bound request the
// agent's request id stands for (a permission, an elicitation, …): the
// agent's $/cancel_request {requestId: id} runs it once. Whoever answers
// the agent otherwise calls settled(id) first.
func (s *session) awaitWithdrawal(id string, withdraw func()) {
	if id == "" {
		return
	}
	if s.turns.withdrawable == nil {
		s.turns.withdrawable = map[string]func(){}
	}
	s.turns.withdrawable[id] = withdraw
}

// settled forgets the withdrawal of the agent's request id: it was
// answered.
func (s *session) settled(id string) { delete(s.turns.withdrawable, id) }

// withdraw runs the withdrawal registered for the agent's request id
// (docs/protocol.md §22 Withdrawn requests): the agent is answered
// -32800, the host's copy is cancelled ($/cancelRequest) and the
// withdrawal audited. Unknown ids (answered already, never put to the
// host) are ignored.
func (s *session) withdraw(id string) {
	f := s.turns.withdrawable[id]
	if f == nil {
		return
	}
	delete(s.turns.withdrawable, id)
	s.log.Info("the agent withdrew a request put to the host")
	f()
}

// withdrawHost ends the host's copy of a withdrawn request: cancel ends
// its context with protocol.ErrWithdrawn, which makes the host
// connection send $/cancelRequest for it.
func withdrawHost(cancel context.CancelCauseFunc) { cancel(protocol.ErrWithdrawn) }
