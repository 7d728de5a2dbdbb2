package rpc

import (
	"context"
	"encoding/json"
	"os"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// flags say when the lifecycle admits a method and how it is called.
type flags uint8

const (
	// beforeInit: admitted before initialize; otherwise a request gets
	// -32002 and a notification is dropped.
	beforeInit flags = 1 << iota
	// afterShutdown: admitted once shutdown began; otherwise a request gets
	// -32600 SHUTTING_DOWN and a notification is dropped.
	afterShutdown
	// notification: the method is a notification (never answered); a
	// request naming it is an unknown method, and the other way round.
	notification
)

// method is one row of the method table.
type method struct {
	flags flags
	// run handles one admitted call. A request's params are already known
	// to be an object, null or absent; run decodes and validates them,
	// answers a bad one through call.reply and hands the rest on.
	run func(s *Server, c *call)
}

// methods is the method table of the host protocol (docs/protocol.md §7, §8):
// adding a method is one row. Rows built by backendCall and backendCallCtx
// decode and validate params into the backend method's params type; a
// backend method taking a ctx gets one cancelled by $/cancelRequest.
var methods = map[string]method{
	protocol.MethodInitialize:       {flags: beforeInit, run: (*Server).initialize},
	protocol.MethodShutdown:         {run: (*Server).shutdown},
	protocol.MethodExit:             {flags: notification | afterShutdown, run: (*Server).exit},
	protocol.MethodCancelRequest:    {flags: notification | afterShutdown, run: (*Server).cancelRequest},
	protocol.MethodCancelRequestACP: {flags: notification | afterShutdown, run: (*Server).cancelRequestACP},
	protocol.MethodSessionOpen:      {run: backendCallCtx(Backend.Open)},
	protocol.MethodSessionPrompt:    {run: backendCallCtx(Backend.Prompt)},
	protocol.MethodSessionCancel:    {run: backendCall(Backend.Cancel)},
	protocol.MethodSessionStatus:    {run: backendCall(Backend.Status)},
	protocol.MethodSessionClose:     {run: backendCall(Backend.Close)},
	protocol.MethodSessionSetModel:  {run: backendCall(Backend.SetModel)},
	protocol.MethodSessionSetMode:   {run: backendCall(Backend.SetMode)},
	protocol.MethodSessionSetConfig: {run: backendCall(Backend.SetConfigOption)},
	protocol.MethodSessionList:      {run: (*Server).list},
	protocol.MethodSessionEvents:    {run: backendCall(Backend.Events)},
	protocol.MethodSidecarStats:     {run: (*Server).stats},
}

// lookup finds the row of a request (notif false) or notification method.
func lookup(name string, notif bool) (method, bool) {
	m, ok := methods[name]
	if !ok || (m.flags&notification != 0) != notif {
		return method{}, false
	}
	return m, true
}

// admits reports whether the lifecycle phase ph admits m.
func (m method) admits(ph phase) bool {
	switch ph {
	case phaseNew:
		return m.flags&beforeInit != 0
	case phaseShutdown:
		return m.flags&afterShutdown != 0
	}
	return true
}

// paramsPtr is a pointer to a params type with a Validate method.
type paramsPtr[T any] interface {
	*T
	validator
}

// backendCall is the row function of a backend method answering later
// through its Reply.
func backendCall[T any, PT paramsPtr[T]](f func(Backend, T, Reply)) func(*Server, *call) {
	return func(s *Server, c *call) {
		p, e := parse[T, PT](c.params)
		if e != nil {
			c.reply(nil, e)
			return
		}
		f(s.backend, p, c.reply)
	}
}

// backendCallCtx is backendCall for a backend method taking a ctx: the ctx
// is cancelled by $/cancelRequest for this request (and once answered).
func backendCallCtx[T any, PT paramsPtr[T]](f func(Backend, context.Context, T, Reply)) func(*Server, *call) {
	return func(s *Server, c *call) {
		p, e := parse[T, PT](c.params)
		if e != nil {
			c.reply(nil, e)
			return
		}
		ctx, r := s.track(c.id, c.reply)
		f(s.backend, ctx, p, r)
	}
}

// initialize moves new → ready: a second initialize is -32600, checked
// before params. The result is sent before the backend's Initialized runs.
func (s *Server) initialize(c *call) {
	if s.currentPhase() != phaseNew {
		c.reply(nil, &protocol.Error{RPCCode: protocol.CodeInvalidRequest, Message: "already initialized",
			Data: protocol.ErrorData{Code: protocol.ErrInvalidRequest}})
		return
	}
	p, e := parse[protocol.InitializeParams](c.params)
	if e != nil {
		c.reply(nil, e)
		return
	}
	s.update(func(st *connState) {
		st.advance(phaseReady)
		st.hostPerms = p.Capabilities.PermissionRequests
		st.hostExt = p.Capabilities.ExtRequests
		if e := p.Capabilities.Elicitation; e != nil {
			st.hostElicit = *e
		}
	})
	res := s.backend.Initialize(p)
	res.Pid = os.Getpid()
	res.Capabilities.Framing = string(s.stream.Framing())
	res.Capabilities.MaxFrameBytes = s.stream.MaxFrameBytes()
	c.reply(res, nil)
	s.backend.Initialized()
}

// shutdown moves to shutdown at once (later requests get -32600) and
// answers with the proofs when the backend's shutdown finished.
func (s *Server) shutdown(c *call) {
	s.asked.Store(true)
	s.update(func(st *connState) { st.advance(phaseShutdown) })
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		c.reply(protocol.ShutdownResult{Proofs: nonNil(s.runShutdown())}, nil)
	}()
}

// list answers session/list; it reads no params.
func (s *Server) list(c *call) {
	c.reply(map[string]any{"sessions": nonNilList(s.backend.List())}, nil)
}

// stats answers sidecar/stats; it reads no params. It runs off the read
// loop: the backend asks every session actor.
func (s *Server) stats(c *call) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		c.reply(s.backend.Stats(), nil)
	}()
}

// exit ends Serve: after shutdown, once that shutdown has finished (an
// `exit` sent right behind `shutdown` must not cut it short: its status is
// the shutdown's), else it cleans up anyway and exits 1. It never blocks
// the read loop: the shutdown may still wait on the host.
func (s *Server) exit(c *call) {
	after := c.phase == phaseShutdown
	go func() {
		s.runShutdown()
		if after {
			s.finish(s.exitStatus())
			return
		}
		s.finish(1)
	}()
}

// cancelRequest cancels the ctx of the pending request params.id names;
// malformed params and unknown ids are ignored.
func (s *Server) cancelRequest(c *call) {
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if c.params == nil || json.Unmarshal(*c.params, &p) != nil {
		return
	}
	s.cancelPending(p.ID)
}

// cancelRequestACP is cancelRequest spelt the ACP way: $/cancel_request
// {"requestId": id} (docs/protocol.md §22).
func (s *Server) cancelRequestACP(c *call) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if c.params == nil || json.Unmarshal(*c.params, &p) != nil {
		return
	}
	s.cancelPending(p.RequestID)
}

// cancelPending cancels the ctx of the pending request whose id is the
// JSON value id; unknown ids are ignored.
func (s *Server) cancelPending(id json.RawMessage) {
	key := idKeyRaw(id)
	var cancel context.CancelFunc
	s.update(func(st *connState) { cancel = st.pending[key] })
	if cancel != nil {
		cancel()
	}
}
