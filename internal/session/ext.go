package session

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Extension methods and the agent's own sessions (docs/protocol.md §23;
// PROTOCOL.md §9 "Extension methods and `_meta`", "The agent's own
// sessions"): an agent's `_…` notifications and requests reach the host,
// the host's reach the agent, and session/agentSessions lists the
// agent's own sessions.

// ExtHost is the part of a Host that carries the agents' `_…` requests
// (implemented by internal/rpc's Server). A Host without it makes the
// agents' extension requests -32601.
type ExtHost interface {
	// ExtRequests: the host declared capabilities.extRequests.
	ExtRequests() bool
	// ExtRequest sends `session/extRequest` and waits for the host's
	// result (verbatim) or error (a *jsonrpc2.Error, verbatim) or ctx.
	ExtRequest(ctx context.Context, p protocol.ExtRequestNotice) (json.RawMessage, error)
}

// onExt handles an agent's `_…` message on the actor.
func (s *Actor) onExt(ev *acpclient.ExtEvent) {
	if ev.Reply == nil && s.plan.Profile.UsageReceipt != "" && ev.Method == s.plan.Profile.UsageReceipt {
		s.onReceipt(ev.Params) // receipt.go; still sent to the host below
	}
	if ev.Reply == nil {
		n := protocol.ExtNotice{Session: s.id, Method: ev.Method, Params: ev.Params}
		switch {
		case s.state.Is(protocol.StateAdmitting):
			s.turns.extBuffered = append(s.turns.extBuffered, n) // sent once the open is answered
		case s.state.Is(protocol.StateClosed, protocol.StateDead):
		default:
			s.pub.Notify(protocol.NotifySessionExtNotification, n)
		}
		return
	}
	h, ok := s.m.Host.(ExtHost)
	if !ok || !h.ExtRequests() || s.state.Is(protocol.StateClosing, protocol.StateClosed, protocol.StateDead) {
		ev.Reply(nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: "method not found: the host takes no extension requests"})
		return
	}
	var rid *string
	if s.turns.turn != nil {
		r := s.turns.turn.requestID
		rid = &r
	}
	params := protocol.ExtRequestNotice{Session: s.id, RequestID: rid, Method: ev.Method, Params: ev.Params}
	s.pub.JournalRequest(protocol.MethodSessionExtRequest, params)
	bound := s.permissionTimeout()
	bctx, cancel := s.boundedCtx(bound)
	ctx, withdraw := context.WithCancelCause(bctx)
	// The agent answered exactly once: by the host's answer, the bound, or
	// its own $/cancel_request (docs/protocol.md §22 Withdrawn requests:
	// -32800 to the agent, $/cancelRequest to the host, a late host answer
	// ignored).
	var once sync.Once
	answer := func(res json.RawMessage, err *jsonrpc2.Error) { once.Do(func() { ev.Reply(res, err) }) }
	s.awaitWithdrawal(ev.ID, func() {
		answer(nil, &jsonrpc2.Error{Code: acpclient.CodeRequestCancelled, Message: "request withdrawn by the agent"})
		withdrawHost(withdraw)
	})
	go func() {
		defer cancel()
		res, err := h.ExtRequest(ctx, params)
		s.post(func() { s.settled(ev.ID) })
		var je *jsonrpc2.Error
		switch {
		case err == nil:
			answer(jsonl.CleanRaw(res), nil)
		case errors.As(err, &je):
			answer(nil, je) // the host's error verbatim
		case ctx.Err() != nil:
			answer(nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError,
				Message: "the host did not answer within " + bound.String() + " (permissionTimeoutMs), or the session ended"})
		default:
			answer(nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: "the host connection is gone"})
		}
	}()
}

// boundedCtx is a ctx that ends after d or when the actor stops; cancel
// releases it (and its watcher) at once.
func (s *Actor) boundedCtx(d time.Duration) (context.Context, context.CancelFunc) {
	var ctx context.Context
	var cancel context.CancelFunc
	if d > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), d)
	} else {
		ctx, cancel = context.WithCancel(context.Background())
	}
	go func() {
		select {
		case <-s.act.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// flushExtBuffered sends the extension notifications that arrived during
// admission, after the open's answer (the host knows the session then).
func (s *Actor) flushExtBuffered() {
	for _, n := range s.turns.extBuffered {
		s.pub.Notify(protocol.NotifySessionExtNotification, n)
	}
	s.turns.extBuffered = nil
}

// agentCallBound bounds a host → agent extension request or
// session/agentSessions: an agent that never answers does not keep the
// host's request open forever.
const agentCallBound = 10 * time.Minute

// callAgent sends the agent method with params (verbatim; nil: none), off
// the actor, bounded by agentCallBound and the actor's life, and calls
// done with the agent's result (cleaned) or the error; no retire starts
// until it has (beginAgentCall). A session that is not open gets its
// usable error through reply.
func (s *Actor) callAgent(method string, params json.RawMessage, done func(json.RawMessage, *protocol.Error), reply Reply) {
	if e := s.usable(); e != nil {
		reply(nil, e)
		return
	}
	conn := s.conn
	var ps any
	if len(params) > 0 {
		ps = params
	}
	ctx, cancel := s.boundedCtx(agentCallBound)
	s.beginAgentCall() // lifecycle.go
	go func() {
		defer cancel()
		defer s.post(s.endAgentCall) // after done has answered the host
		var res json.RawMessage
		err := conn.Call(ctx, method, ps, &res)
		var je *jsonrpc2.Error
		switch {
		case err == nil:
			if res == nil {
				res = json.RawMessage("null")
			}
			done(jsonl.CleanRaw(res), nil)
		case errors.As(err, &je):
			e := protocol.Domain(protocol.ErrAgentError, "the agent answered "+method+" with error "+strconv.FormatInt(je.Code, 10)+": "+s.red.Clean(je.Message), false)
			raw, _ := json.Marshal(je)
			e.Data.AgentError = json.RawMessage(s.red.Clean(string(jsonl.CleanRaw(raw))))
			done(nil, e)
		case ctx.Err() != nil:
			done(nil, protocol.Domain(protocol.ErrAgentError, "the agent did not answer "+method+" within "+agentCallBound.String()+", or the session ended", true))
		default:
			done(nil, protocol.Domain(protocol.ErrProviderProcessLost, "the provider connection closed before it answered "+method, false))
		}
	}()
}
