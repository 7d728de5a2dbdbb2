package client

import (
	"context"
	"encoding/json"
	"errors"
	"os"

	"github.com/sourcegraph/jsonrpc2"
)

// Frame is one frame on the connection as Options.OnFrame sees it.
type Frame struct {
	// Sent is true for what this Client wrote to the sidecar's stdin,
	// false for a line read from its stdout.
	Sent bool
	// Raw is true for bytes written by WriteRaw: they are reported as
	// written and may hold several, partial or malformed frames.
	Raw bool
	// Data is one JSON-RPC message without its line end (or, when Raw,
	// the bytes written).
	Data []byte
}

// Request is a sidecar → host request as Options.OnRequest sees it: ID is
// the JSON-RPC id verbatim (a number or a string), Params the params
// verbatim.
type Request struct {
	// ID is the request's JSON-RPC id verbatim (a number or a string).
	ID json.RawMessage
	// Method is the request's method, e.g. "session/requestPermission".
	Method string
	// Params are the request's params verbatim.
	Params json.RawMessage
}

// Call is a request sent with Send whose answer has not been read yet.
type Call struct {
	c      *Client
	method string
	id     uint64
	w      jsonrpc2.Waiter
}

// ID is the request's JSON-RPC id (a number).
func (k *Call) ID() uint64 { return k.id }

// Wait waits for the answer and decodes its result into result (may be
// nil, or a *json.RawMessage). Errors are as for Client.Call; if ctx ends
// first, the request is cancelled with $/cancelRequest.
func (k *Call) Wait(ctx context.Context, result any) error {
	var raw json.RawMessage
	if err := k.w.Wait(ctx, &raw); err != nil {
		if ctx.Err() != nil {
			k.c.cancelRequest(k.id)
		}
		return convert(k.method, err)
	}
	return decode(k.method, raw, result)
}

// Call sends any host → sidecar request (docs/protocol.md §7, §8, or one
// this package has no method for yet) and decodes its result into result
// (may be nil, or a *json.RawMessage). params must be nil, or marshal to a
// JSON object, an array or null (docs/protocol.md §3). Errors: the
// sidecar's *Error, DataCodeTransport, DataCodeBadResult,
// DataCodeCancelled (then $/cancelRequest was sent), and, with nothing
// sent, -32600 INVALID_REQUEST for what the sidecar would answer with id
// null (docs/protocol.md §3 Bad frames): an empty method, other params, or
// a frame over capabilities.maxFrameBytes (see Error).
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, method, params, result)
}

// Send sends a request without waiting for its answer; Call.Wait reads
// it. Answers may come out of order (docs/protocol.md §4). Errors and
// checks are Call's.
func (c *Client) Send(ctx context.Context, method string, params any) (*Call, error) {
	w, id, err := c.dispatch(ctx, method, params)
	if err != nil {
		return nil, err
	}
	return &Call{c: c, method: method, id: id, w: w}, nil
}

// Notify sends a notification (exit, $/cancelRequest, …). params are
// checked as Call's. Errors: DataCodeTransport, DataCodeCancelled, -32600
// INVALID_REQUEST (nothing sent).
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	if err := ctx.Err(); err != nil {
		return convert(method, err)
	}
	raw, err := encodeParams(method, params)
	if err != nil {
		return err
	}
	if err := c.wire.conn.Notify(ctx, method, sendParams(raw)); err != nil {
		return convert(method, err)
	}
	return nil
}

// WriteRaw writes b to the sidecar's stdin verbatim, between whole frames
// of this Client, and reports it to Options.OnFrame with Raw set. It is
// for testing how a sidecar handles malformed input; answers to ids this
// Client did not send are seen only through OnFrame. Errors:
// DataCodeTransport.
func (c *Client) WriteRaw(b []byte) error {
	if err := c.wire.stream.WriteObject(rawFrame(b)); err != nil {
		return convert("write", err)
	}
	return nil
}

// CloseInput closes the sidecar's stdin and nothing else: the sidecar
// treats the EOF as shutdown followed by exit (docs/protocol.md §4) while
// this Client goes on reading its answers and notifications until it
// exits. Later requests fail with DataCodeTransport.
func (c *Client) CloseInput() error {
	if err := c.wire.pipes.closeInput(); err != nil && !errors.Is(err, os.ErrClosed) {
		return convert("close", err)
	}
	return nil
}

// Process is the sidecar process (for its Pid, or to signal it).
func (c *Client) Process() *os.Process { return c.proc.cmd.Process }

// ProcessState is the sidecar's exit state once Done is closed, else nil.
func (c *Client) ProcessState() *os.ProcessState {
	select {
	case <-c.proc.done:
		return c.proc.cmd.ProcessState
	default:
		return nil
	}
}
