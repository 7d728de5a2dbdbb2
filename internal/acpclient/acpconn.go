package acpclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/strictjson"
)

// Event is what the provider connection posts to its session's actor;
// exactly one of its members is set: ACP session/updates, in wire order
// (Updates set; Batch, if set, holds them and is released once they are
// handled), an ACP session/request_permission (Permission), an agent's
// `_…` message (Ext) or another agent message (AgentMsg).
type Event struct {
	// Updates are ACP session/update notifications' params, in wire
	// order; nil when another member is set.
	Updates []Update
	// Batch, when set, holds Updates' bytes: the session calls its
	// Release once it has handled them and keeps none of them.
	Batch *Slab
	// Permission is an ACP session/request_permission.
	Permission *PermissionAsk
	// Ext is an agent's `_…` notification or request (docs/protocol.md
	// §23).
	Ext *ExtEvent
	// AgentMsg is an ACP elicitation/create, elicitation/complete or
	// $/cancel_request (agentmsg.go).
	AgentMsg *AgentMsg
}

// PermissionAsk is one ACP session/request_permission waiting for its
// outcome. Answer, or Fail, is called exactly once.
type PermissionAsk struct {
	// Params are the request's params as the agent sent them (the frame's
	// bytes, not jsonrpc2's re-encoding; not cleaned).
	Params json.RawMessage
	// Malformed is why the frame itself is malformed (an envelope member
	// twice...); "" when it is not.
	Malformed string
	// Answer answers the request with outcome.
	Answer func(outcome acp.RequestPermissionOutcome)
	// ID is the request's JSON-RPC id as JSON text (what the agent's
	// $/cancel_request names, AgentMsg.CancelledID's form); Fail answers it with a
	// JSON-RPC error instead of an outcome.
	ID string
	// Fail answers the request with a JSON-RPC error (code, message)
	// instead of an outcome; see the type doc for the once rule.
	Fail func(code int64, message string)
}

// Conn is the ACP client side of one provider: sourcegraph/jsonrpc2 over
// the provider's stdio with the SDK's types (docs/architecture.md, "ACP
// client side"). Notifications are handled synchronously, in order, by
// posting to the actor's inbox: a slow host slows the provider through
// the pipe (backpressure) instead of dropping the connection (the
// acp-go-sdk 1024-queue hazard). Its methods are safe for concurrent use.
type Conn struct {
	conn *jsonrpc2.Conn
	out  *outbox // the agent's stdin
	// seq numbers the requests sent to the agent (nextID).
	seq atomic.Uint64
	// stdinClosed, when set, is called once when a write finds the
	// agent's stdin closed (EPIPE): nothing can reach it any more.
	stdinClosed atomic.Pointer[func()]
}

// OnStdinClosed sets what runs when a write finds the agent's stdin
// closed (EPIPE), once, from the outbox's writer goroutine: f must not
// block.
func (a *Conn) OnStdinClosed(f func()) { a.stdinClosed.Store(&f) }

// Stalled reports whether the agent is hung or has taken none of a write
// for d (outbox.stalled): a request sent now would not reach it within d.
func (a *Conn) Stalled(d time.Duration) bool { return a.out != nil && a.out.stalled(d) }

// stdio closes both pipes of a provider connection.
type stdio struct {
	w io.WriteCloser
	r io.ReadCloser
}

func (s stdio) Close() error {
	err := s.w.Close()
	if e := s.r.Close(); err == nil {
		err = e
	}
	return err
}

// NewConn starts the connection over the agent's stdin and stdout, which
// it owns from now on (Close closes both). maxLine bounds one line of the
// agent's stdout in bytes (≤ 0: jsonl.DefaultMaxFrameBytes); a longer
// line is dropped, like any line that is not one JSON-RPC 2.0 message.
// post delivers events to the actor, in wire order, from the read loop;
// it may block (backpressure) and must return false once the actor is
// gone (a request then gets its "nobody can answer" reply). Frames to the
// agent go through an outbox (outbox.go): writing never blocks, and an
// agent that stops reading its stdin is found hung. badUpdate (may be nil)
// is called for each session/update dropped for not being an ACP
// SessionUpdate. log gets no line content, ever.
func NewConn(stdin io.WriteCloser, stdout io.ReadCloser, maxLine int, log *zap.Logger, post func(Event) bool, badUpdate func()) *Conn {
	stdout = pollPipe(stdout) // one wake-up per batch, not per line (pipepoll_linux.go)
	a := &Conn{}
	ob := newOutbox(stdin, 0, 0, func(why error) {
		if errors.Is(why, syscall.EPIPE) {
			log.Info("the agent closed its stdin: nothing more can reach it")
			if f := a.stdinClosed.Load(); f != nil {
				(*f)()
			}
			return
		}
		log.Warn("the agent is not reading its stdin (a write stalled past its deadline or its queue overflowed): it is hung, nothing more is sent to it, and its close skips session/close",
			zap.Error(why))
	})
	st := newLineStream(stdout, ob, stdio{w: ob, r: stdout}, maxLine, func(fe *jsonl.FrameError) {
		// Never log the line itself: provider output may carry secrets.
		log.Debug("provider stdout line discarded", zap.Stringer("kind", fe.Kind), zap.String("reason", fe.Reason))
	})
	if badUpdate == nil {
		badUpdate = func() {}
	}
	st.onBadUpdate = func(why string) {
		log.Debug("session/update that is not an ACP SessionUpdate discarded", zap.String("reason", why))
		badUpdate()
	}
	// The fast path: session/update lines go from the line to the actor.
	st.onUpdates = func(b *Slab) { post(Event{Updates: b.ups, Batch: b}) }
	h := &acpHandler{post: post, log: log, badUpdate: st.onBadUpdate, frame: st.lastFrame}
	a.conn, a.out = jsonrpc2.NewConn(context.Background(), st, h, jsonrpc2.SetLogger(quietLogger{log})), ob
	return a
}

// Call sends request method with params (JSON-encoded; nil: none) and
// waits for its answer, decoded into result (nil: discarded), or ctx;
// when ctx ends first (a bound ran out, the host cancelled), the agent is
// sent $/cancel_request for it (agentcancel.go). Errors: the agent's
// error as a *jsonrpc2.Error, ctx's error, ErrAgentHung when the agent
// does not read its stdin, or jsonrpc2.ErrClosed once the connection has
// ended.
func (a *Conn) Call(ctx context.Context, method string, params, result any) error {
	w, id, err := a.Dispatch(method, params)
	if err != nil {
		return err
	}
	err = w.Wait(ctx, result)
	if err != nil && ctx.Err() != nil {
		a.CancelRequest(id)
	}
	return err
}

// Dispatch sends request method with params and returns its waiter, which
// stays valid after a Wait whose ctx ended (a late answer can still be
// read from it), and its id (for CancelRequest). The error is the send's
// (ErrAgentHung, jsonrpc2.ErrClosed): then nothing was sent.
func (a *Conn) Dispatch(method string, params any) (jsonrpc2.Waiter, jsonrpc2.ID, error) {
	id := a.nextID()
	w, err := a.conn.DispatchCall(context.Background(), method, params, jsonrpc2.PickID(id))
	return w, id, err
}

// Notify sends notification method with params (JSON-encoded; nil:
// none). It never blocks on the agent; the error is the send's
// (ErrAgentHung, jsonrpc2.ErrClosed).
func (a *Conn) Notify(method string, params any) error {
	return a.conn.Notify(context.Background(), method, params)
}

// Close closes the connection and both pipes; what is still queued for
// the agent is dropped (Drain first to flush it).
func (a *Conn) Close() { _ = a.conn.Close() }

// Done is closed once the connection has ended (the agent's stdout ended,
// or Close).
func (a *Conn) Done() <-chan struct{} { return a.conn.DisconnectNotify() }

type acpHandler struct {
	post      func(Event) bool
	log       *zap.Logger
	badUpdate func(why string)
	// frame returns the raw frame of the message being handled
	// (lineStream.lastFrame).
	frame func() []byte
}

// rawParams returns the params of the message being handled as the agent
// sent them, decoded strictly (no envelope member twice or differing from
// JSON-RPC's only by case); why says what makes the frame malformed.
func (h *acpHandler) rawParams() (params json.RawMessage, why string) {
	env, why := strictjson.DecodeObject(h.frame(), "jsonrpc", "id", "method", "params")
	if why != "" {
		return nil, "message: " + why
	}
	return env["params"], ""
}

// Handle runs in the provider connection's read loop.
func (h *acpHandler) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	// jsonrpc2 hands params re-encoded through a map (duplicates merged,
	// bytes that are not UTF-8 replaced): what the policy and the host see
	// is decoded from the frame itself.
	params, malformed := h.rawParams()
	switch {
	case req.Method == acp.ClientMethodSessionUpdate && req.Notif:
		// What lineStream's fast path did not take (an escaped key, a
		// frame to clean, ...), decoded strictly.
		u, why := decodeUpdateParams(params)
		if malformed != "" {
			why = malformed
		}
		if why != "" {
			h.badUpdate(why)
			return
		}
		h.post(Event{Updates: []Update{u}})
	case req.Method == acp.ClientMethodSessionRequestPermission && !req.Notif:
		id := req.ID
		ask := &PermissionAsk{Params: params, Malformed: malformed, Answer: func(outcome acp.RequestPermissionOutcome) {
			if err := conn.Reply(context.Background(), id, acp.RequestPermissionResponse{Outcome: outcome}); err != nil {
				h.log.Debug("permission answer not delivered", zap.Error(err))
			}
		}, ID: idText(id), Fail: h.failer(conn, id)}
		if !h.post(Event{Permission: ask}) {
			ask.Answer(acp.NewRequestPermissionOutcomeCancelled())
		}
	case h.agentMessage(conn, req, params, malformed):
		// elicitation/create, elicitation/complete, $/cancel_request
		// (agentmsg.go).
	case strings.HasPrefix(req.Method, "_") && malformed != "":
		// A frame decoders disagree on never reaches the host.
		h.log.Debug("malformed extension message discarded", zap.String("reason", malformed))
		if !req.Notif {
			_ = conn.ReplyWithError(context.Background(), req.ID, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidRequest, Message: "malformed message: " + malformed})
		}
	case strings.HasPrefix(req.Method, "_"):
		// Extension methods reach the host (docs/protocol.md §23).
		h.post(Event{Ext: newExtEvent(conn, req, params)})
	case req.Notif:
		// Unknown notifications are ignored.
	default:
		// The sidecar advertises no fs/terminal capability: refuse.
		_ = conn.ReplyWithError(context.Background(), req.ID, &jsonrpc2.Error{
			Code: jsonrpc2.CodeMethodNotFound, Message: "method not supported by acpx-sidecar"})
	}
}

type quietLogger struct{ l *zap.Logger }

func (q quietLogger) Printf(format string, v ...interface{}) {
	q.l.Debug("provider jsonrpc2", zap.String("format", format))
}
