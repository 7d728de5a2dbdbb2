package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/protocol"
)

// Reply delivers the outcome of one host request: a result, or an error
// (an *protocol.Error; any other error becomes -32603). Called exactly once.
// It is an alias of adapter.Reply's type (both name the plain func type), so
// the adapter's Manager implements Backend without either package importing
// the other.
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
	// Initialized runs once, after the initialize result was sent (the
	// sweep of an earlier sidecar's leftovers reports through it).
	Initialized()
	// Shutdown closes every session within its bound and returns their
	// proofs; it blocks.
	Shutdown() []*protocol.Proof
}

type lifecycle int

const (
	stateNew lifecycle = iota
	stateReady
	stateShutdown
)

// Server is the host connection: it owns the jsonrpc2.Conn over
// stdin/stdout, the lifecycle state and the table of pending requests for
// $/cancelRequest. It also implements the adapter's Host interface
// (Notify, RequestPermission, PermissionRequests).
type Server struct {
	log     *zap.Logger
	stream  *FrameStream
	conn    *jsonrpc2.Conn
	backend Backend

	mu          sync.Mutex
	state       lifecycle
	hostPerms   bool
	pending     map[string]context.CancelFunc
	inflight    map[string]bool // ids of requests not yet answered
	shutdownOK  bool            // shutdown finished with every proof complete
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
}

// Options configure a Server. In/Out are the host's stdin/stdout.
type Options struct {
	In            io.Reader
	Out           io.Writer
	Framing       Framing
	MaxFrameBytes int
	Logger        *zap.Logger
	// OnShutdown, if set, is called once when shutdown begins (by request,
	// stdin EOF, exit or Stop); main arms its exit watchdog with it.
	OnShutdown func()
}

// NewServer returns a Server that is not yet serving; call Serve.
func NewServer(o Options) *Server {
	s := &Server{log: o.Logger, onShutdown: o.OnShutdown, pending: map[string]context.CancelFunc{}, inflight: map[string]bool{}, done: make(chan struct{}),
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
// proof complete, else 1 (PROTOCOL §2).
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
// (PROTOCOL §2.4). Safe to call from any goroutine, more than once.
func (s *Server) Stop() {
	go func() {
		s.runShutdown()
		s.finish(s.exitStatus())
	}()
}

func (s *Server) exitStatus() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdownOK {
		return 0
	}
	return 1
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
		s.mu.Lock()
		s.state = stateShutdown
		s.mu.Unlock()
		proofs := s.backend.Shutdown()
		ok := true
		for _, p := range proofs {
			ok = ok && p.Complete
		}
		s.mu.Lock()
		s.shutdownOK = ok
		s.mu.Unlock()
		s.shutdownRes <- proofs
	})
	proofs := <-s.shutdownRes
	s.shutdownRes <- proofs
	return proofs
}

// Notify sends a notification to the host through the serialized writer.
// It blocks while the host is not reading (backpressure).
func (s *Server) Notify(method string, params any) error {
	return s.conn.Notify(context.Background(), method, params)
}

// PermissionRequests reports whether the host declared
// capabilities.permissionRequests at initialize.
func (s *Server) PermissionRequests() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostPerms
}

// RequestPermission sends `session/requestPermission` to the host and
// waits for its answer or ctx (PROTOCOL §5).
func (s *Server) RequestPermission(ctx context.Context, p protocol.PermissionRequestParams) (protocol.PermissionRequestResult, error) {
	var res protocol.PermissionRequestResult
	err := s.conn.Call(ctx, protocol.RequestPermission, p, &res)
	return res, err
}

// Handle implements jsonrpc2.Handler. It runs in the read loop: it
// validates and enqueues, never waits for a session.
func (s *Server) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	<-s.ready
	if req.Notif {
		s.handleNotification(req)
		return
	}
	key := idKey(req.ID)
	s.mu.Lock()
	state := s.state
	dup := s.inflight[key]
	if !dup {
		s.inflight[key] = true
	}
	s.mu.Unlock()
	if dup {
		// Two answers with one id could not be told apart by the host.
		je := &jsonrpc2.Error{Code: protocol.CodeInvalidRequest, Message: "request id " + key + " is already in use by a pending request"}
		je.SetError(protocol.ErrorData{Code: protocol.ErrInvalidRequest})
		_ = conn.ReplyWithError(context.Background(), req.ID, je)
		return
	}
	reply := s.replier(req.ID)
	switch {
	case state == stateNew && req.Method != protocol.MethodInitialize:
		reply(nil, &protocol.Error{RPCCode: protocol.CodeNotInitialized, Message: "server not initialized",
			Data: protocol.ErrorData{Code: protocol.ErrNotInitialized}})
		return
	case state == stateShutdown:
		reply(nil, &protocol.Error{RPCCode: protocol.CodeInvalidRequest, Message: "the server is shut down",
			Data: protocol.ErrorData{Code: protocol.ErrShuttingDown}})
		return
	}
	s.dispatch(req, reply)
}

func (s *Server) handleNotification(req *jsonrpc2.Request) {
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	if state == stateNew {
		return // PROTOCOL §2.1: notifications before initialize are dropped
	}
	switch req.Method {
	case protocol.MethodExit:
		if state != stateShutdown {
			// exit without shutdown: clean up anyway, then exit 1.
			go func() {
				s.runShutdown()
				s.finish(1)
			}()
			return
		}
		s.finish(s.exitStatus())
	case protocol.MethodCancelRequest:
		var p struct {
			ID json.RawMessage `json:"id"`
		}
		if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil {
			return
		}
		s.mu.Lock()
		cancel := s.pending[idKeyRaw(p.ID)]
		s.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	default:
		// Unknown notifications (and any before initialize) are dropped.
	}
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
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
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

// decode unmarshals params into v; a type mismatch names its field.
func decode(raw *json.RawMessage, v any) *protocol.Error {
	if raw == nil || string(*raw) == "null" {
		return nil
	}
	if len(*raw) > 0 && (*raw)[0] != '{' {
		return protocol.InvalidParams("params", "params must be an object")
	}
	if err := json.Unmarshal(*raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "params"
			}
			return protocol.InvalidParams(field, fmt.Sprintf("%s must be %s", field, jsonKind(te.Type.Kind().String())))
		}
		return protocol.InvalidParams("params", "params do not match the method's schema")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "uint64", "float64":
		return "a number"
	case "slice":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	}
	return "of another type"
}

type validator interface{ Validate() *protocol.Error }

// parse decodes and validates params into v.
func parse[T any, PT interface {
	*T
	validator
}](req *jsonrpc2.Request) (T, *protocol.Error) {
	var v T
	if e := decode(req.Params, &v); e != nil {
		return v, e
	}
	return v, PT(&v).Validate()
}

func (s *Server) track(id jsonrpc2.ID, reply Reply) (context.Context, Reply) {
	ctx, cancel := context.WithCancel(context.Background())
	key := idKey(id)
	s.mu.Lock()
	s.pending[key] = cancel
	s.mu.Unlock()
	return ctx, func(result any, err error) {
		s.mu.Lock()
		delete(s.pending, key)
		s.mu.Unlock()
		cancel()
		reply(result, err)
	}
}

func (s *Server) dispatch(req *jsonrpc2.Request, reply Reply) {
	b := s.backend
	if req.Params != nil && len(*req.Params) > 0 && (*req.Params)[0] != '{' && string(*req.Params) != "null" {
		reply(nil, protocol.InvalidParams("params", "params must be an object"))
		return
	}
	switch req.Method {
	case protocol.MethodInitialize:
		s.mu.Lock()
		again := s.state != stateNew
		s.mu.Unlock()
		if again {
			reply(nil, &protocol.Error{RPCCode: protocol.CodeInvalidRequest, Message: "already initialized",
				Data: protocol.ErrorData{Code: protocol.ErrInvalidRequest}})
			return
		}
		p, e := parse[protocol.InitializeParams](req)
		if e != nil {
			reply(nil, e)
			return
		}
		s.mu.Lock()
		s.state = stateReady
		s.hostPerms = p.Capabilities.PermissionRequests
		s.mu.Unlock()
		res := b.Initialize(p)
		res.Pid = os.Getpid()
		res.Capabilities.Framing = string(s.stream.Framing())
		res.Capabilities.MaxFrameBytes = s.stream.MaxFrameBytes()
		reply(res, nil)
		b.Initialized()
	case protocol.MethodShutdown:
		s.mu.Lock()
		s.state = stateShutdown
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			reply(protocol.ShutdownResult{Proofs: nonNil(s.runShutdown())}, nil)
		}()
	case protocol.MethodSessionOpen:
		p, e := parse[protocol.OpenParams](req)
		if e != nil {
			reply(nil, e)
			return
		}
		ctx, r := s.track(req.ID, reply)
		b.Open(ctx, p, r)
	case protocol.MethodSessionPrompt:
		p, e := parse[protocol.PromptParams](req)
		if e != nil {
			reply(nil, e)
			return
		}
		ctx, r := s.track(req.ID, reply)
		b.Prompt(ctx, p, r)
	case protocol.MethodSessionCancel:
		if p, e := parse[protocol.CancelParams](req); e != nil {
			reply(nil, e)
		} else {
			b.Cancel(p, reply)
		}
	case protocol.MethodSessionStatus:
		if p, e := parse[protocol.SessionRef](req); e != nil {
			reply(nil, e)
		} else {
			b.Status(p, reply)
		}
	case protocol.MethodSessionClose:
		if p, e := parse[protocol.CloseParams](req); e != nil {
			reply(nil, e)
		} else {
			b.Close(p, reply)
		}
	case protocol.MethodSessionSetModel:
		if p, e := parse[protocol.SetModelParams](req); e != nil {
			reply(nil, e)
		} else {
			b.SetModel(p, reply)
		}
	case protocol.MethodSessionSetMode:
		if p, e := parse[protocol.SetModeParams](req); e != nil {
			reply(nil, e)
		} else {
			b.SetMode(p, reply)
		}
	case protocol.MethodSessionSetConfig:
		if p, e := parse[protocol.SetConfigOptionParams](req); e != nil {
			reply(nil, e)
		} else {
			b.SetConfigOption(p, reply)
		}
	case protocol.MethodSessionList:
		reply(map[string]any{"sessions": nonNilList(b.List())}, nil)
	default:
		reply(nil, &protocol.Error{RPCCode: protocol.CodeMethodNotFound, Message: "unknown method " + quote(req.Method),
			Data: protocol.ErrorData{Code: protocol.ErrMethodNotFound}})
	}
}

func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func nonNil(p []*protocol.Proof) []*protocol.Proof {
	if p == nil {
		return []*protocol.Proof{}
	}
	return p
}

func nonNilList(l []protocol.ListEntry) []protocol.ListEntry {
	if l == nil {
		return []protocol.ListEntry{}
	}
	return l
}

// zapPrintf adapts zap to jsonrpc2's Logger.
type zapPrintf struct{ l *zap.Logger }

func (z zapPrintf) Printf(format string, v ...interface{}) {
	z.l.Warn("jsonrpc2", zap.String("detail", fmt.Sprintf(format, v...)))
}
