package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// Options say how Start runs the sidecar and where its notifications go.
// Every callback runs on a goroutine of this package, never on the
// connection's read loop, so a callback may call the Client; OnProof,
// OnExited, OnUpdate and OnDecision run one at a time, in wire order.
type Options struct {
	// Binary is the path of the acpx-sidecar executable (required).
	Binary string
	// StateDir, when set, is passed as --state-dir (absolute).
	StateDir string
	// Args are more command-line flags (docs/protocol.md §2), after
	// --state-dir. Only ndjson framing is supported: no --framing lsp.
	Args []string
	// Env is the sidecar's environment ("K=V"); nil inherits this
	// process's. Providers take only its minimal part (--inherit-env minimal,
	// docs/protocol.md §16.1) plus each open's inheritEnv names and env.
	Env []string
	// OnPermission answers session/requestPermission. When it is set, Start
	// declares capabilities.permissionRequests, and each request is
	// answered with what it returns, on its own goroutine; ctx ends when the
	// connection closes. When nil, escalations follow each session's
	// nonInteractivePermissions (and a request, should one come, is
	// answered Cancelled()).
	OnPermission func(ctx context.Context, req PermissionRequest) PermissionOutcome
	// OnProof receives cleanup/proof notifications: provider-exit, late
	// handshake, retained and recovered cleanups (docs/protocol.md §9).
	OnProof func(Proof)
	// OnExited receives session/exited notifications.
	OnExited func(Exited)
	// OnUpdate receives the session/update notifications that no running
	// Prompt call claims: updates outside turns (requestId null, e.g. the
	// ones buffered during admission) and late updates of earlier turns.
	OnUpdate func(Update)
	// OnDecision receives session/permission audit notifications.
	OnDecision func(PermissionDecision)
	// Stderr receives the sidecar's JSON log lines; nil discards them.
	Stderr io.Writer
}

// Client is one running sidecar and its JSON-RPC connection. Its methods
// and its Sessions' are safe for concurrent use; each request is answered
// independently (docs/protocol.md §4: answers may come out of order).
type Client struct {
	opts   Options
	cmd    *exec.Cmd
	conn   *jsonrpc2.Conn
	stop   context.CancelFunc // ends the connection's context
	events *queue
	nextID atomic.Uint64
	info   InitializeResult

	mu    sync.Mutex
	turns map[turnKey]*turnSink

	handlers sync.WaitGroup // goroutines answering sidecar requests

	done     chan struct{} // closed once the process is reaped and all is torn down
	exitCode int           // valid after done
	waitErr  error         // valid after done
}

type turnKey struct{ session, requestID string }

// Start launches Options.Binary with `--state-dir StateDir` (when set) and
// Args, and runs initialize (protocol version 1, clientInfo
// "acpx-sidecar-go-client"). ctx bounds only the start: the process
// outlives it. On failure the process is killed and reaped, and the error
// is DataCodeStart, the sidecar's error, DataCodeTransport or
// DataCodeCancelled.
func Start(ctx context.Context, opts Options) (*Client, error) {
	if opts.Binary == "" {
		return nil, newError("start", DataCodeStart, nil, "Options.Binary is empty")
	}
	var args []string
	if opts.StateDir != "" {
		args = append(args, "--state-dir", opts.StateDir)
	}
	args = append(args, opts.Args...)
	cmd := exec.Command(opts.Binary, args...)
	cmd.Env = opts.Env
	cmd.Stderr = opts.Stderr
	cmd.WaitDelay = 2 * time.Second // bound the copy of Stderr after exit

	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, newError("start", DataCodeStart, err, "%v", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = inR.Close()
		_ = inW.Close()
		return nil, newError("start", DataCodeStart, err, "%v", err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	_ = inR.Close()
	_ = outW.Close()
	if err != nil {
		_ = inW.Close()
		_ = outR.Close()
		return nil, newError("start", DataCodeStart, err, "%v", err)
	}

	c := &Client{opts: opts, cmd: cmd, events: newQueue(), turns: map[turnKey]*turnSink{}, done: make(chan struct{})}
	connCtx, stop := context.WithCancel(context.Background())
	c.stop = stop
	stream := jsonrpc2.NewBufferedStream(&pipes{r: outR, w: inW}, ndjsonCodec{})
	c.conn = jsonrpc2.NewConn(connCtx, stream, handler{c},
		jsonrpc2.SetLogger(log.New(io.Discard, "", 0)))
	go c.reap()

	params := map[string]any{
		"protocolVersion": 1,
		"clientInfo":      map[string]string{"name": "acpx-sidecar-go-client", "version": "0.1.0"},
		"capabilities":    map[string]bool{"permissionRequests": opts.OnPermission != nil},
	}
	if err := c.call(ctx, "initialize", params, &c.info); err != nil {
		c.kill()
		<-c.done
		return nil, err
	}
	return c, nil
}

// reap waits for the process, lets the read loop drain its stdout, then
// tears the connection and the callback goroutines down.
func (c *Client) reap() {
	err := c.cmd.Wait()
	c.exitCode = c.cmd.ProcessState.ExitCode()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		c.waitErr = err
	}
	select {
	case <-c.conn.DisconnectNotify(): // stdout EOF: every frame was read
	case <-time.After(2 * time.Second): // a descendant still holds stdout
	}
	_ = c.conn.Close()
	c.stop()
	c.handlers.Wait()
	c.events.close()
	<-c.events.done
	close(c.done)
}

func (c *Client) kill() { _ = c.cmd.Process.Kill() }

// Info is the sidecar's initialize result (pid, containment, agents,
// bounds).
func (c *Client) Info() InitializeResult { return c.info }

// Done is closed once the sidecar process has exited and every callback
// has returned.
func (c *Client) Done() <-chan struct{} { return c.done }

// ExitCode is the sidecar's exit status once Done is closed (0: shutdown
// completed with every proof complete; 1: anything else; -1: killed by a
// signal), and -1 before.
func (c *Client) ExitCode() int {
	select {
	case <-c.done:
		return c.exitCode
	default:
		return -1
	}
}

// call sends one request and decodes its result into result (may be nil).
// When ctx ends first, $/cancelRequest is sent for it (best effort).
func (c *Client) call(ctx context.Context, method string, params, result any) error {
	w, id, err := c.dispatch(ctx, method, params)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := w.Wait(ctx, &raw); err != nil {
		if ctx.Err() != nil {
			c.cancelRequest(id)
		}
		return convert(method, err)
	}
	return decode(method, raw, result)
}

func (c *Client) dispatch(ctx context.Context, method string, params any) (jsonrpc2.Waiter, uint64, error) {
	if err := ctx.Err(); err != nil {
		return jsonrpc2.Waiter{}, 0, convert(method, err)
	}
	id := c.nextID.Add(1)
	w, err := c.conn.DispatchCall(ctx, method, params, jsonrpc2.PickID(jsonrpc2.ID{Num: id}))
	if err != nil {
		return jsonrpc2.Waiter{}, 0, convert(method, err)
	}
	return w, id, nil
}

func (c *Client) cancelRequest(id uint64) {
	_ = c.conn.Notify(context.Background(), "$/cancelRequest", map[string]uint64{"id": id})
}

func decode(method string, raw json.RawMessage, result any) error {
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return newError(method, DataCodeBadResult, err, "cannot decode the result: %v", err)
	}
	return nil
}

// Open runs session/open and returns the admitted session. A failed open
// is an *Error whose Proof() is the cleanup proof of what it launched
// (docs/protocol.md §5 data.cleanup). If ctx ends during admission the
// sidecar is sent $/cancelRequest, which aborts the open and cleans up.
func (c *Client) Open(ctx context.Context, p OpenParams) (*Session, error) {
	s := &Session{c: c}
	if err := c.call(ctx, "session/open", p, &s.res); err != nil {
		return nil, err
	}
	s.id = s.res.Session
	return s, nil
}

// Attach returns a handle for a session id this Client did not open (from
// List, or a stored id); its Result is nil. The id is not checked here:
// calls on an unknown one fail with SESSION_NOT_FOUND.
func (c *Client) Attach(session string) *Session { return &Session{c: c, id: session} }

// List runs session/list: every admitted session, oldest first.
func (c *Client) List(ctx context.Context) ([]ListEntry, error) {
	var res struct {
		Sessions []ListEntry `json:"sessions"`
	}
	err := c.call(ctx, "session/list", map[string]any{}, &res)
	return res.Sessions, err
}

// Shutdown runs shutdown (every session is closed and its proof
// returned), sends exit and waits for the process to end. It returns the
// proofs and, when the exit status (ExitCode) is not 0, an *Error with
// DataCodeExitStatus. If ctx ends first the sidecar is killed (each
// guardian then ends its tree) and the error is DataCodeCancelled.
func (c *Client) Shutdown(ctx context.Context) ([]Proof, error) {
	var res struct {
		Proofs []Proof `json:"proofs"`
	}
	if err := c.call(ctx, "shutdown", nil, &res); err != nil {
		return nil, err
	}
	_ = c.conn.Notify(ctx, "exit", nil)
	return res.Proofs, c.wait(ctx, "shutdown")
}

// Close ends the sidecar without a shutdown request: it closes its stdin,
// which the sidecar treats as shutdown followed by exit (docs/protocol.md
// §4), and waits as Shutdown does. Proofs, if wanted, come only from
// Shutdown.
func (c *Client) Close(ctx context.Context) error {
	_ = c.conn.Close()
	return c.wait(ctx, "close")
}

func (c *Client) wait(ctx context.Context, method string) error {
	select {
	case <-c.done:
	case <-ctx.Done():
		c.kill()
		<-c.done
		return newError(method, DataCodeCancelled, ctx.Err(), "the sidecar was killed: %v", ctx.Err())
	}
	if c.waitErr != nil {
		return newError(method, DataCodeTransport, c.waitErr, "waiting for the sidecar: %v", c.waitErr)
	}
	if c.exitCode != 0 {
		return newError(method, DataCodeExitStatus, nil, "the sidecar exited with status %d", c.exitCode)
	}
	return nil
}
