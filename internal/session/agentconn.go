package session

import (
	"context"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
)

// agentConn is all the actor asks of its ACP connection to the provider
// (internal/acpclient's Conn is the one implementation): requests and
// notifications to the agent, the abandon of a request it gave up on, and
// the connection's end. The connection knows nothing of the actor; what
// the agent sends reaches the actor through the handler it was made with
// (admitSide.Started).
type agentConn interface {
	// Call sends request method with params and waits for the answer,
	// decoded into result (nil: discarded), or ctx (then the agent is
	// sent $/cancel_request). Errors: the agent's *jsonrpc2.Error, ctx's,
	// acpclient.ErrAgentHung, or jsonrpc2.ErrClosed.
	Call(ctx context.Context, method string, params, result any) error
	// Dispatch sends request method without waiting; the Waiter waits
	// for the answer and id names the request for CancelRequest. Errors:
	// the send's (then nothing was sent).
	Dispatch(method string, params any) (jsonrpc2.Waiter, jsonrpc2.ID, error)
	// Notify sends notification method, never blocking on the agent;
	// errors: the send's.
	Notify(method string, params any) error
	// CancelRequest sends the agent $/cancel_request for id.
	CancelRequest(id jsonrpc2.ID)
	// Stalled reports whether the agent is hung or has taken none of a
	// write for d: a request sent now would not reach it within d.
	Stalled(d time.Duration) bool
	// Drain waits up to d for what is queued to the agent to reach its
	// pipe (a best-effort flush before Close).
	Drain(d time.Duration)
	// Close closes the connection and both pipes, dropping what is
	// still queued.
	Close()
}

// The one implementation.
var _ agentConn = (*acpclient.Conn)(nil)
