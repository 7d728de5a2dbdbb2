package launch

import (
	"context"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// lateHandshake remembers the session-creating request (session/new, load
// or resume) that admission gave up on, so that a session the agent
// creates after a cancel or timeout is still closed (docs/rules.md#r6, #r7).
// It is local to the admission worker (watch runs in a goroutine the
// worker starts and waits for).
type lateHandshake struct {
	waiter  *jsonrpc2.Waiter
	resumed string // the session id a load/resume names
	// closeSupported: initialize advertised sessionCapabilities.close
	// (set by handshake; the late close and the admission's cleanup need it).
	closeSupported bool
}

// call sends method and waits for its answer or ctx; when ctx ends first,
// the request is kept as the pending late handshake.
func (l *lateHandshake) call(ctx context.Context, conn *acpclient.Conn, method string, params, out any) error {
	w, id, err := conn.Dispatch(method, params)
	if err != nil {
		return err
	}
	if err = w.Wait(ctx, out); err != nil && ctx.Err() != nil {
		conn.CancelRequest(id) // still watched: a session it creates anyway is closed
		l.waiter = &w
		if p, ok := params.(acpclient.SessionParams); ok {
			l.resumed = p.SessionID
		}
	}
	return err
}

// watch waits for the late answer (until the connection closes) and, if
// it created a session, closes it under the retained close policy
// (Session.CloseLate: failures retried with backoff for no count,
// bounded by RetainedCloseWindow and by tree's exit; docs/rules.md#r16,
// #r20). It returns nil when no late session appeared.
func (l *lateHandshake) watch(s Session, conn *acpclient.Conn, tree Tree) *cleanup.CloseResult {
	if l.waiter == nil {
		return nil
	}
	var st acpclient.SessionState
	if err := l.waiter.Wait(context.Background(), &st); err != nil {
		return nil
	}
	id := st.SessionID
	if id == "" {
		id = l.resumed
	}
	if id == "" {
		return nil
	}
	if !l.closeSupported {
		return &cleanup.CloseResult{Close: protocol.ProtocolClose{Outcome: protocol.CloseUnsupported}}
	}
	r := s.CloseLate(conn, tree, id)
	return &r
}
