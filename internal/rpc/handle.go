package rpc

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Handle implements jsonrpc2.Handler. It runs in the read loop: it
// validates and enqueues, never waits for a session.
//
// A request is checked in this order, each step answering the first
// failure: its id is not already in flight; the lifecycle admits its
// method (-32002 before initialize, -32600 after shutdown); params, when
// present, are an object; the method exists (-32601); then the method's
// row decodes, validates and calls the backend. A notification the
// lifecycle does not admit, or of no notification method, is dropped.
func (s *Server) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	<-s.ready
	if raw := s.stream.LastParams(); raw != nil && req.Params != nil {
		// The params as the host wrote them (FrameStream.LastParams).
		req.Params = &raw
	}
	m, known := lookup(req.Method, req.Notif)
	if req.Notif {
		ph := s.currentPhase()
		if known && m.admits(ph) {
			m.run(s, &call{params: req.Params, phase: ph})
		}
		// docs/protocol.md §4 Lifecycle, item 1: notifications before
		// initialize, and unknown ones (§3), are dropped.
		return
	}
	key := idKey(req.ID)
	var ph phase
	var dup bool
	s.update(func(st *connState) {
		ph = st.phase
		dup = st.inflight[key]
		if !dup {
			st.inflight[key] = true
		}
	})
	if dup {
		// Two answers with one id could not be told apart by the host.
		je := &jsonrpc2.Error{Code: protocol.CodeInvalidRequest, Message: "request id " + key + " is already in use by a pending request"}
		je.SetError(protocol.ErrorData{Code: protocol.ErrInvalidRequest})
		_ = conn.ReplyWithError(context.Background(), req.ID, je)
		return
	}
	c := &call{id: req.ID, params: req.Params, phase: ph, reply: s.replier(req.ID)}
	// An unknown method is admitted neither before initialize nor after
	// shutdown, like every method without the flag.
	switch {
	case ph == phaseNew && m.flags&beforeInit == 0:
		c.reply(nil, &protocol.Error{RPCCode: protocol.CodeNotInitialized, Message: "server not initialized",
			Data: protocol.ErrorData{Code: protocol.ErrNotInitialized}})
	case ph == phaseShutdown && m.flags&afterShutdown == 0:
		c.reply(nil, &protocol.Error{RPCCode: protocol.CodeInvalidRequest, Message: "the server is shut down",
			Data: protocol.ErrorData{Code: protocol.ErrShuttingDown}})
	case !objectOrAbsent(req.Params):
		c.reply(nil, errParamsNotObject())
	case !known:
		msg := "unknown method " + quote(req.Method)
		if methods[req.Method].flags&notification != 0 {
			// Known, as a notification: say so (found by a fresh-user trial).
			msg = quote(req.Method) + " is a notification: send it without an id"
		}
		c.reply(nil, &protocol.Error{RPCCode: protocol.CodeMethodNotFound, Message: msg,
			Data: protocol.ErrorData{Code: protocol.ErrMethodNotFound}})
	default:
		m.run(s, c)
	}
}

// call is one admitted request or notification as a method row sees it.
type call struct {
	id     jsonrpc2.ID // zero for a notification
	params *json.RawMessage
	// phase is the lifecycle phase the call was admitted in.
	phase phase
	// reply answers a request exactly once; nil for a notification.
	reply Reply
}

func idKey(id jsonrpc2.ID) string {
	b, _ := json.Marshal(id)
	return string(b)
}

func idKeyRaw(raw json.RawMessage) string {
	var id jsonrpc2.ID
	if json.Unmarshal(raw, &id) != nil {
		return ""
	}
	return idKey(id)
}

// replier returns the Reply for one request id; it logs nothing of the
// result.
func (s *Server) replier(id jsonrpc2.ID) Reply {
	var once sync.Once
	key := idKey(id)
	return func(result any, err error) {
		once.Do(func() {
			s.update(func(st *connState) { delete(st.inflight, key) })
			if err != nil {
				pe := protocol.AsError(err)
				if pe.RPCCode == protocol.CodeInternal {
					s.log.Error("internal error", zap.Error(err))
				}
				je := &jsonrpc2.Error{Code: int64(pe.RPCCode), Message: pe.Message}
				je.SetError(pe.Data)
				if werr := s.conn.ReplyWithError(context.Background(), id, je); werr != nil {
					s.log.Debug("reply not sent", zap.Error(werr))
				}
				return
			}
			if result == nil {
				result = struct{}{}
			}
			if werr := s.conn.Reply(context.Background(), id, result); werr != nil {
				s.log.Debug("reply not sent", zap.Error(werr))
			}
		})
	}
}

// track registers a ctx for $/cancelRequest of request id and returns it
// with a Reply that unregisters (and cancels) it before answering.
func (s *Server) track(id jsonrpc2.ID, reply Reply) (context.Context, Reply) {
	ctx, cancel := context.WithCancel(context.Background())
	key := idKey(id)
	s.update(func(st *connState) { st.pending[key] = cancel })
	return ctx, func(result any, err error) {
		s.update(func(st *connState) { delete(st.pending, key) })
		cancel()
		reply(result, err)
	}
}
