package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/internal/buildinfo"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Client is one running sidecar and its JSON-RPC connection. Its methods
// and its Sessions' are safe for concurrent use; each request is answered
// independently (docs/protocol.md §4: answers may come out of order).
type Client struct {
	opts Options
	info InitializeResult // initialize's result, for Info
	proc sidecarProcess   // the sidecar process and how it ended
	wire connection       // the JSON-RPC connection's I/O
	subs subscribers      // who waits for what the sidecar sends, by session or request
	cb   callbacks        // the goroutines that run the Options callbacks
}

// sidecarProcess is the sidecar process a Client runs: its command, the
// tee of its stderr, and how it ended (reap sets exitCode and waitErr,
// then closes done).
type sidecarProcess struct {
	cmd      *exec.Cmd
	stderr   *stderrTee
	done     chan struct{} // closed once the process is reaped and all is torn down
	exitCode int           // valid after done
	waitErr  error         // valid after done
}

// connection is the JSON-RPC connection's I/O: the jsonrpc2 conn over the
// line stream over the process's pipes, the session/update fast path, the
// request ids and the frame limit.
type connection struct {
	conn       *jsonrpc2.Conn
	stream     *lineStream // conn's stream, for WriteRaw
	router     router      // the session/update fast path (updates.go)
	pipes      *pipes
	stop       context.CancelFunc // ends the connection's context
	nextID     atomic.Uint64
	frameLimit atomic.Int64 // capabilities.maxFrameBytes, 0 before initialize
}

// subscribers are the pending calls and watches that what the sidecar
// sends is delivered to, all guarded by mu.
type subscribers struct {
	mu    sync.Mutex
	turns map[turnKey]*turnSink
	opens map[uint64]*openWatch // Open calls by request id
	life  map[string]*lifeWatch // lifecycle of sessions by id (lifecycle.go)
}

// callbacks are the goroutines that run the Options callbacks: the
// ordered event queue, the pending permission asks' handler contexts, and
// the handlers reap waits for (trackMu guards torn and handlers' Add).
type callbacks struct {
	events *queue
	asks   permAsks // pending permission asks' handler contexts

	trackMu  sync.Mutex
	torn     bool           // reap has begun waiting for handlers
	handlers sync.WaitGroup // goroutines answering sidecar requests, late opens
}

type turnKey struct{ session, requestID string }

// Start launches Options.Binary with `--state-dir StateDir` (when set) and
// Args, and runs initialize (protocol version 1, clientInfo
// "acpx-sidecar-go-client"). ctx bounds only the start: the process
// outlives it. On failure the process is killed and reaped, and the error
// is DataCodeStart, the sidecar's error, DataCodeTransport or
// DataCodeCancelled. When the sidecar ends before it answers initialize
// (bad flags, exit status 2, or a default it cannot enforce, such as
// --default-pids without a pids controller; docs/protocol.md §2), the
// error is DataCodeStart and its Message gives the exit status and the end
// of the sidecar's stderr (at most 4 KiB; the sidecar never logs a secret,
// docs/protocol.md §13).
func Start(ctx context.Context, opts Options) (*Client, error) {
	c, err := Spawn(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := c.Initialize(ctx); err != nil {
		c.kill()
		<-c.proc.done
		var ce *Error
		if errors.As(err, &ce) && ce.DataCode == DataCodeTransport {
			status := "ended"
			if ps := c.proc.cmd.ProcessState; ps != nil {
				status = "ended with " + ps.String()
			}
			msg := "the sidecar " + status + " before answering initialize"
			if tail := c.StderrTail(); tail != "" {
				msg += "; the end of its stderr:\n" + tail
			} else {
				msg += " and wrote nothing to stderr"
			}
			return nil, &Error{DataCode: DataCodeStart, Message: msg, method: "start", cause: err}
		}
		if errors.As(err, &ce) && ce.DataCode == "" {
			// Every error of the sidecar has a data.code: something else
			// answered (found by a fresh-user trial: /bin/cat echoed the
			// client's own frames back).
			return nil, &Error{DataCode: DataCodeStart, Message: "the binary did not answer initialize as acpx-sidecar: " + err.Error(), method: "start", cause: err}
		}
		return nil, err
	}
	if name := c.info.ServerInfo.Name; name != protocol.ServerName {
		c.kill()
		<-c.proc.done
		return nil, &Error{DataCode: DataCodeStart, Message: "the binary answered initialize as " + strconv.Quote(name) + ", not acpx-sidecar", method: "start"}
	}
	return c, nil
}

// Spawn launches the sidecar as Start does but sends nothing: the caller
// runs Initialize (or its own initialize through Call). It is for hosts
// and tests that drive the lifecycle themselves (docs/protocol.md §4).
// Errors: DataCodeStart.
func Spawn(ctx context.Context, opts Options) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, convert("start", err)
	}
	if opts.Binary == "" {
		return nil, newError("start", DataCodeStart, nil, "Options.Binary is empty")
	}
	for i, a := range opts.Args {
		if f, ok := strings.CutPrefix(a, "--framing"); ok && (f == "" && i+1 < len(opts.Args) && opts.Args[i+1] != "ndjson" || f != "" && f != "=ndjson") {
			return nil, newError("start", DataCodeStart, nil, "Options.Args: this client speaks ndjson framing only (not %q)", strings.Join(opts.Args[i:min(i+2, len(opts.Args))], " "))
		}
	}
	var args []string
	if opts.StateDir != "" {
		args = append(args, "--state-dir", opts.StateDir)
	}
	args = append(args, opts.Args...)
	cmd := exec.Command(opts.Binary, args...)
	cmd.Env = opts.Env
	tee := &stderrTee{out: opts.Stderr}
	cmd.Stderr = tee
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

	c := &Client{opts: opts,
		proc: sidecarProcess{cmd: cmd, stderr: tee, done: make(chan struct{})},
		subs: subscribers{turns: map[turnKey]*turnSink{}, opens: map[uint64]*openWatch{}, life: map[string]*lifeWatch{}},
		cb:   callbacks{events: newQueue()}}
	connCtx, stop := context.WithCancel(context.Background())
	c.wire.stop = stop
	c.wire.pipes = &pipes{r: outR, w: inW}
	c.wire.router.c = c
	c.wire.stream = newLineStream(c.wire.pipes, opts.OnFrame, &c.wire.frameLimit)
	c.wire.stream.updates, c.wire.stream.flush = c.wire.router.take, c.wire.router.flush
	c.wire.conn = jsonrpc2.NewConn(connCtx, c.wire.stream, handler{c},
		jsonrpc2.SetLogger(log.New(io.Discard, "", 0)), jsonrpc2.OnRecv(c.onRecv))
	go c.reap()
	return c, nil
}

// Initialize runs initialize (protocol version 1, clientInfo
// "acpx-sidecar-go-client", capabilities.permissionRequests when
// OnPermission or OnRequest is set, capabilities.extRequests when
// OnExtRequest is, capabilities.elicitation when OnElicitation or
// ElicitationModes is set) and keeps the result for Info. Errors:
// the sidecar's (-32602 with data.supported, -32600 when already
// initialized), DataCodeTransport, DataCodeCancelled.
func (c *Client) Initialize(ctx context.Context) error {
	caps := map[string]any{"permissionRequests": c.opts.OnPermission != nil || c.opts.OnRequest != nil,
		"extRequests": c.opts.OnExtRequest != nil}
	if m := c.elicitationModes(); m != nil {
		caps["elicitation"] = m
	}
	params := map[string]any{
		"protocolVersion": 1,
		"clientInfo":      map[string]string{"name": "acpx-sidecar-go-client", "version": buildinfo.Version()},
		"capabilities":    caps,
	}
	return c.call(ctx, "initialize", params, &c.info)
}

// reap waits for the process, lets the read loop drain its stdout, then
// tears the connection and the callback goroutines down.
func (c *Client) reap() {
	err := c.proc.cmd.Wait()
	c.proc.exitCode = c.proc.cmd.ProcessState.ExitCode()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		c.proc.waitErr = err
	}
	select {
	case <-c.wire.conn.DisconnectNotify(): // stdout EOF: every frame was read
	case <-time.After(2 * time.Second): // a descendant still holds stdout
	}
	_ = c.wire.conn.Close()
	c.wire.stop()
	c.cb.trackMu.Lock()
	c.cb.torn = true
	c.cb.trackMu.Unlock()
	c.cb.handlers.Wait()
	c.cb.events.close()
	<-c.cb.events.done
	close(c.proc.done)
}

// track runs f on a goroutine that reap waits for before Done is closed;
// once reap has begun waiting it runs nothing and returns false.
func (c *Client) track(f func()) bool {
	c.cb.trackMu.Lock()
	defer c.cb.trackMu.Unlock()
	if c.cb.torn {
		return false
	}
	c.cb.handlers.Add(1)
	go func() {
		defer c.cb.handlers.Done()
		f()
	}()
	return true
}

func (c *Client) kill() { _ = c.proc.cmd.Process.Kill() }

// StderrTail is the end of what the sidecar wrote to stderr so far (its
// JSON log lines, or a flag error), at most 4 KiB, starting at a whole
// line when older output was dropped; it is kept whether or not
// Options.Stderr is set.
func (c *Client) StderrTail() string { return c.proc.stderr.Tail() }

// Info is the sidecar's initialize result (pid, containment, agents,
// bounds).
func (c *Client) Info() InitializeResult { return c.info }

// Done is closed once the sidecar process has exited and every callback
// has returned.
func (c *Client) Done() <-chan struct{} { return c.proc.done }

// ExitCode is the sidecar's exit status once Done is closed (0: shutdown
// completed with every proof complete; 1: anything else; -1: killed by a
// signal), and -1 before.
func (c *Client) ExitCode() int {
	select {
	case <-c.proc.done:
		return c.proc.exitCode
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

// dispatch sends a request with a new id. Params that are not an object
// or array, an empty method and a frame over the sidecar's limit are
// refused before anything is written (frames.go).
func (c *Client) dispatch(ctx context.Context, method string, params any) (jsonrpc2.Waiter, uint64, error) {
	id := c.wire.nextID.Add(1)
	w, err := c.dispatchID(ctx, id, method, params)
	return w, id, err
}

func (c *Client) dispatchID(ctx context.Context, id uint64, method string, params any) (jsonrpc2.Waiter, error) {
	if err := ctx.Err(); err != nil {
		return jsonrpc2.Waiter{}, convert(method, err)
	}
	raw, err := encodeParams(method, params)
	if err != nil {
		return jsonrpc2.Waiter{}, err
	}
	w, err := c.wire.conn.DispatchCall(ctx, method, sendParams(raw), jsonrpc2.PickID(jsonrpc2.ID{Num: id}))
	if err != nil {
		return jsonrpc2.Waiter{}, convert(method, err)
	}
	return w, nil
}

func (c *Client) cancelRequest(id uint64) {
	_ = c.wire.conn.Notify(context.Background(), "$/cancelRequest", map[string]uint64{"id": id})
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
// sidecar is sent $/cancelRequest, which aborts the open and cleans up
// (docs/protocol.md §7 $/cancelRequest), and Open returns
// DataCodeCancelled at once; the sidecar's later answer still reaches the
// host: the cleanup proof of its error (ADMISSION_ABORTED, or whatever
// ended the admission) goes to Options.OnProof, and if the admission had
// already succeeded, the session, of which the host has no handle, is
// closed with reason "open cancelled by the host" and that close's proof
// goes to OnProof (a CLEANUP_INCOMPLETE close's final proof comes as
// cleanup/proof). Such a proof is queued when the answer is read, so it
// may come after notifications read later.
func (c *Client) Open(ctx context.Context, p OpenParams) (*Session, error) {
	return c.open(ctx, p)
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
	_ = c.wire.conn.Notify(ctx, "exit", nil)
	return res.Proofs, c.wait(ctx, "shutdown")
}

// Close ends the sidecar without a shutdown request: it closes its stdin,
// which the sidecar treats as shutdown followed by exit (docs/protocol.md
// §4), and waits as Shutdown does. Proofs, if wanted, come only from
// Shutdown.
func (c *Client) Close(ctx context.Context) error {
	_ = c.wire.conn.Close()
	return c.wait(ctx, "close")
}

func (c *Client) wait(ctx context.Context, method string) error {
	select {
	case <-c.proc.done:
	case <-ctx.Done():
		c.kill()
		<-c.proc.done
		return newError(method, DataCodeCancelled, ctx.Err(), "the sidecar was killed: %v", ctx.Err())
	}
	if c.proc.waitErr != nil {
		return newError(method, DataCodeTransport, c.proc.waitErr, "waiting for the sidecar: %v", c.proc.waitErr)
	}
	if c.proc.exitCode != 0 {
		return newError(method, DataCodeExitStatus, nil, "the sidecar exited with status %d", c.proc.exitCode)
	}
	return nil
}
