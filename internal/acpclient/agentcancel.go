package acpclient

import (
	"context"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// nextID is the id of the next request to the agent: every request gets
// its id here, from 1 (0 would read as unset to jsonrpc2), so the sender
// knows it for $/cancel_request.
func (a *Conn) nextID() jsonrpc2.ID { return jsonrpc2.ID{Num: a.seq.Add(1)} }

// CancelRequest tells the agent the sidecar no longer waits for request
// id (from Dispatch): ACP $/cancel_request {"requestId": id}
// (docs/protocol.md §22, "When the sidecar gives up on a request it sent
// an agent"). Best effort: the outbox never blocks, and an agent that
// stopped reading gets nothing.
func (a *Conn) CancelRequest(id jsonrpc2.ID) {
	_ = a.conn.Notify(context.Background(), MethodCancelRequest, map[string]jsonrpc2.ID{"requestId": id})
}

// DrainBound bounds how long a closing connection waits (Drain) for its
// queued frames (a $/cancel_request just sent) to reach the agent's pipe.
const DrainBound = 100 * time.Millisecond

// Drain waits until everything queued for the agent was written to its
// pipe, the agent is found hung, or d passes (a best-effort flush before
// Close, which drops what is still queued).
func (a *Conn) Drain(d time.Duration) {
	if a.out == nil {
		return
	}
	deadline := time.Now().Add(d)
	for {
		a.out.mu.Lock()
		idle := len(a.out.q) == 0 && a.out.busySince.IsZero() || a.out.hung || a.out.closed
		a.out.mu.Unlock()
		if idle || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
