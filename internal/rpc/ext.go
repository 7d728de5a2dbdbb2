package rpc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// ExtBackend is the part of a Backend serving the extension and
// agent-session methods (docs/protocol.md §23). A Backend without it
// answers them -32601.
type ExtBackend interface {
	// ExtRequest sends the agent of p.Session its `_…` request p.Method
	// and answers protocol.ExtRequestResult, or AGENT_ERROR.
	ExtRequest(p protocol.ExtRequestParams, reply Reply)
	// ExtNotification sends the agent of p.Session its `_…`
	// notification; errors are logged, never answered.
	ExtNotification(p protocol.ExtNotificationParams)
	// AgentSessions answers the agent's ACP session/list result verbatim.
	AgentSessions(p protocol.AgentSessionsParams, reply Reply)
}

// extRows are the method-table rows of docs/protocol.md §23, added to
// methods at init.
func init() {
	methods[protocol.MethodSessionExtRequest] = method{run: extCall(func(b ExtBackend, p protocol.ExtRequestParams, r Reply) { b.ExtRequest(p, r) })}
	methods[protocol.MethodSessionAgentSessions] = method{run: extCall(func(b ExtBackend, p protocol.AgentSessionsParams, r Reply) { b.AgentSessions(p, r) })}
	methods[protocol.NotifySessionExtNotification] = method{flags: notification, run: (*Server).extNotification}
}

// extCall is backendCall for an ExtBackend method.
func extCall[T any, PT paramsPtr[T]](f func(ExtBackend, T, Reply)) func(*Server, *call) {
	return func(s *Server, c *call) {
		b, ok := s.backend.(ExtBackend)
		if !ok {
			c.reply(nil, &protocol.Error{RPCCode: protocol.CodeMethodNotFound, Message: "this sidecar does not serve extension methods",
				Data: protocol.ErrorData{Code: protocol.ErrMethodNotFound}})
			return
		}
		p, e := parse[T, PT](c.params)
		if e != nil {
			c.reply(nil, e)
			return
		}
		f(b, p, c.reply)
	}
}

// extNotification forwards a host `session/extNotification`; bad params
// are dropped (a notification is never answered).
func (s *Server) extNotification(c *call) {
	b, ok := s.backend.(ExtBackend)
	if !ok {
		return
	}
	p, e := parse[protocol.ExtNotificationParams](c.params)
	if e != nil {
		s.log.Debug("session/extNotification dropped: " + e.Message)
		return
	}
	b.ExtNotification(p)
}

// ExtRequests reports whether the host declared capabilities.extRequests
// at initialize.
func (s *Server) ExtRequests() bool {
	return readState(s, func(st *connState) bool { return st.hostExt })
}

// ExtRequest sends `session/extRequest` to the host and waits for its
// answer or ctx. It returns the host's result verbatim, or the host's
// error as a *jsonrpc2.Error (docs/protocol.md §23).
func (s *Server) ExtRequest(ctx context.Context, p protocol.ExtRequestNotice) (json.RawMessage, error) {
	var res json.RawMessage
	// callHost (hostcalls.go): the one numbering of the sidecar's requests
	// to the host, and $/cancelRequest when the agent withdraws it.
	err := s.callHost(ctx, protocol.MethodSessionExtRequest, p, &res)
	var je *jsonrpc2.Error
	if errors.As(err, &je) {
		return nil, je
	}
	return res, err
}
