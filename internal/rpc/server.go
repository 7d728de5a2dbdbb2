package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Reply delivers the outcome of one host request: a result, or an error
// (an *protocol.Error; any other error becomes -32603). Called exactly once.
// It is an alias of session.Reply's type (both name the plain func type), so
// internal/adapter's Manager implements Backend without internal/rpc and
// internal/adapter or internal/session importing each other.
type Reply = func(result any, err error)

// Backend is what the server dispatches validated requests to (the session
// manager in internal/adapter). Methods taking a Reply must return quickly
// (they only enqueue) and call reply later; they are called in wire order,
// from the connection's read loop. ctx of Open and Prompt is cancelled by
// the host's $/cancelRequest for that request.
type Backend interface {
	Initialize(p protocol.InitializeParams) protocol.InitializeResult
	Open(ctx context.Context, p protocol.OpenParams, reply Reply)
	Prompt(ctx context.Context, p protocol.PromptParams, reply Reply)
	Cancel(p protocol.CancelParams, reply Reply)
	Status(p protocol.SessionRef, reply Reply)
	Close(p protocol.CloseParams, reply Reply)
	SetModel(p protocol.SetModelParams, reply Reply)
	SetMode(p protocol.SetModeParams, reply Reply)
	SetConfigOption(p protocol.SetConfigOptionParams, reply Reply)
	List() []protocol.ListEntry
	// Events answers session/events from the session journal
	// (docs/protocol.md §16).
	Events(p protocol.EventsParams, reply Reply)
	// Stats answers sidecar/stats (docs/protocol.md §17); it may block
	// briefly (it asks every session actor its state).
	Stats() protocol.StatsResult
	// Initialized runs once, after the initialize result was sent (the
	// sweep of an earlier sidecar's leftovers reports through it).
	Initialized()
	// Shutdown closes every session within its bound and returns their
	// proofs; it blocks.
	Shutdown() []*protocol.Proof
}

// Server is the host connection: it owns the jsonrpc2.Conn over
// stdin/stdout, the lifecycle state and the table of pending requests for
// $/cancelRequest. It also implements internal/session's Host interface
// (Notify, RequestPermission, PermissionRequests). Requests go through the
// method table (methods.go); the state they share lives in one connState
// (state.go), changed only through update.
type Server struct {
	log     *zap.Logger
	stream  *FrameStream
	conn    *jsonrpc2.Conn
	backend Backend

	mu sync.Mutex // guards st
	st connState

	exitOnce    sync.Once
	exitCode    int
	done        chan struct{}
	shutdownRun sync.Once
	shutdownRes chan []*protocol.Proof
	ready       chan struct{} // closed once conn is set
	eof         chan struct{} // closed when stdin ends
	eofOnce     sync.Once
	onShutdown  func()
	wg          sync.WaitGroup // request goroutines

	// asked: the host sent `shutdown` (ShutdownRequested, shutdown_requested.go).
	asked atomic.Bool
	// hostSeq numbers the sidecar's requests to the host (callHost).
	hostSeq atomic.Uint64
}

// Options configure a Server. In/Out are the host's stdin/stdout.
type Options struct {
	// In is where host frames are read from (the host's stdin); closed
	// by the stream's Close when it is an io.Closer.
	In io.Reader
	// Out is where frames to the host are written (the host's stdout).
	Out io.Writer
	// Framing is FramingNDJSON or FramingLSP, both ways; anything but
	// FramingLSP (the zero value too) is treated as NDJSON.
	Framing Framing
	// MaxFrameBytes bounds one inbound frame, in bytes; ≤ 0:
	// DefaultMaxFrameBytes.
	MaxFrameBytes int
	// Logger receives the Server's logs; nil: a no-op logger.
	Logger *zap.Logger
	// OnShutdown, if set, is called once when shutdown begins (by request,
	// stdin EOF, exit or Stop); main arms its exit watchdog with it.
	OnShutdown func()
}

// NewServer returns a Server that is not yet serving; call Serve.
func NewServer(o Options) *Server {
	s := &Server{log: o.Logger, onShutdown: o.OnShutdown, st: newConnState(), done: make(chan struct{}),
		shutdownRes: make(chan []*protocol.Proof, 1), ready: make(chan struct{}), eof: make(chan struct{})}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	var closer io.Closer
	if c, ok := o.In.(io.Closer); ok {
		closer = c
	}
	s.stream = NewFrameStream(o.In, o.Out, closer, o.Framing, o.MaxFrameBytes)
	s.stream.OnEOF = func() { s.eofOnce.Do(func() { close(s.eof) }) }
	s.stream.OnBadFrame = func(code int, reason string) {
		s.log.Warn("discarded inbound frame", zap.Int("code", code), zap.String("reason", reason))
	}
	return s
}

// Serve runs the connection with backend until `exit`, stdin EOF or Stop,
// and returns the process exit status: 0 when shutdown completed with every
// proof complete, else 1 (docs/protocol.md §4 Lifecycle).
func (s *Server) Serve(backend Backend) int {
	s.backend = backend
	// jsonrpc2 calls Handle synchronously from its read loop, which is what
	// keeps requests in wire order.
	s.conn = jsonrpc2.NewConn(context.Background(), s.stream, s, jsonrpc2.SetLogger(zapPrintf{s.log}))
	close(s.ready)
	select {
	case <-s.eof:
		// stdin EOF: the same as shutdown then exit; replies to requests
		// still pending (a running turn) are written before we go.
		s.runShutdown()
		s.finish(s.exitStatus())
	case <-s.conn.DisconnectNotify():
		// stdout unwritable: nobody can hear us; still clean up.
		s.runShutdown()
		s.finish(s.exitStatus())
	case <-s.done:
	}
	s.wg.Wait()
	s.stream.Release()
	_ = s.conn.Close()
	return s.exitCode
}

// Stop performs shutdown then exit, as for SIGTERM/SIGINT/SIGHUP
// (docs/protocol.md §4 Lifecycle, item 5). Safe to call from any goroutine,
// more than once.
func (s *Server) Stop() {
	go func() {
		s.runShutdown()
		s.finish(s.exitStatus())
	}()
}

func (s *Server) exitStatus() int {
	code := 1
	s.update(func(st *connState) {
		if st.shutdownOK {
			code = 0
		}
	})
	return code
}

func (s *Server) finish(code int) {
	s.exitOnce.Do(func() {
		s.exitCode = code
		close(s.done)
	})
}

// runShutdown runs the backend's shutdown once; later callers wait for the
// first and get its proofs.
func (s *Server) runShutdown() []*protocol.Proof {
	s.shutdownRun.Do(func() {
		if s.onShutdown != nil {
			s.onShutdown()
		}
		s.update(func(st *connState) { st.advance(phaseShutdown) })
		proofs := s.backend.Shutdown()
		ok := true
		for _, p := range proofs {
			ok = ok && p.Complete
		}
		s.update(func(st *connState) { st.shutdownOK = ok })
		s.shutdownRes <- proofs
	})
	proofs := <-s.shutdownRes
	s.shutdownRes <- proofs
	return proofs
}

// Notify sends a notification to the host through the serialized writer,
// params verbatim (one JSON object, the session's notify point built it;
// docs/architecture.md, "Update path"): one write, no re-encoding. It
// blocks while the host is not reading (backpressure); after the
// connection ended it returns jsonrpc2.ErrClosed.
func (s *Server) Notify(method string, params json.RawMessage) error {
	<-s.ready
	select {
	case <-s.conn.DisconnectNotify():
		return jsonrpc2.ErrClosed
	default:
	}
	return s.stream.WriteNotification(method, params)
}

// NotifyBatch sends ns, in order, as consecutive notification frames in
// one write (jsonl.Writer.WriteNotifications; params verbatim, as Notify),
// serialized with jsonrpc2's own writes: a response sent after NotifyBatch
// returned follows every frame of the batch, and none comes between them
// (docs/architecture.md, "Update path"). It blocks while the host is not
// reading (backpressure) and returns the first write error; after the
// connection ended it returns jsonrpc2.ErrClosed and writes nothing.
func (s *Server) NotifyBatch(ns []jsonl.Notification) error {
	<-s.ready
	select {
	case <-s.conn.DisconnectNotify():
		return jsonrpc2.ErrClosed
	default:
	}
	return s.stream.WriteNotifications(ns)
}

// PermissionRequests reports whether the host declared
// capabilities.permissionRequests at initialize.
func (s *Server) PermissionRequests() bool {
	return readState(s, func(st *connState) bool { return st.hostPerms })
}

// RequestPermission sends `session/requestPermission` to the host and
// waits for its answer or ctx (docs/protocol.md §9). The answer is read
// in the flat shape or ACP's nested one (permanswer.go); any other is a
// -32602 *protocol.Error naming the member at fault, and the caller asks
// again.
func (s *Server) RequestPermission(ctx context.Context, p protocol.PermissionRequestParams) (protocol.PermissionRequestResult, error) {
	var raw json.RawMessage
	if err := s.callHost(ctx, protocol.RequestPermission, p, &raw); err != nil {
		return protocol.PermissionRequestResult{}, err
	}
	res, perr := parsePermissionAnswer(raw) // permanswer.go: the flat shape or ACP's
	if perr != nil {
		s.log.Warn("host answer refused", zap.String("method", protocol.RequestPermission), zap.String("field", perr.Data.Field))
		return res, perr
	}
	return res, nil
}

// zapPrintf adapts zap to jsonrpc2's Logger.
type zapPrintf struct{ l *zap.Logger }

func (z zapPrintf) Printf(format string, v ...interface{}) {
	z.l.Warn("jsonrpc2", zap.String("detail", fmt.Sprintf(format, v...)))
}
