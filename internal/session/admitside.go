package session

import (
	"context"
	"errors"
	"io"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/provstate"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// admitSide is the session's side of its admission worker
// (launch.Session): the steps that need the session or its Manager, run
// off the actor on the session's immutable fields, posting to the actor
// what it must own.
type admitSide struct{ s *Actor }

var _ launch.Session = admitSide{}

// Prepare takes the key's provider state over for an open with a state
// store (provstate.go), or, for a revive, checks its lease and restores
// removed provider state (provrevive.go).
func (a admitSide) Prepare(ctx context.Context, in *launch.Input) (*provstate.State, *protocol.Restore, *protocol.Error) {
	s := a.s
	var state *provstate.State
	var restored *protocol.Restore
	if s.m.stateStore() != nil && in.Revive == nil {
		lease, r, e := s.acquireState(ctx, in)
		if e != nil {
			return nil, nil, e
		}
		state, restored = provstate.New(lease, in.StateSources), r
	}
	if in.Revive != nil && in.Revive.State != nil {
		// A key another sidecar took over is not run on stale state: the
		// revive ends the session fenced, nothing launched; local provider
		// state a published retire removed comes back from the store
		// (provstate.go).
		e := s.verifyLease(ctx, in.Revive.State)
		if e == nil {
			e = s.restoreForRevive(ctx, in.Revive.State, in.Store)
		}
		if e != nil {
			return nil, nil, e
		}
	}
	return state, restored, nil
}

// TakeTreeSlot is takeTreeSlot (registries.go) with its release.
func (a admitSide) TakeTreeSlot(ctx context.Context) (func(), *protocol.Error) {
	if ok, e := a.s.takeTreeSlot(ctx); !ok {
		return nil, e
	}
	return a.s.releaseTreeSlot, nil
}

// LedgerBeforeLaunch is writeLedgerBeforeLaunch (marker.go).
func (a admitSide) LedgerBeforeLaunch(st *store.Store) (*store.Pending, error) {
	return a.s.writeLedgerBeforeLaunch(st)
}

// RecordTree completes the ledger entry with tree's identity; on failure
// the entry written before the launch is synced instead and the error is
// told and retried once admitted (outbox.Publisher.NoteLedgerFailure).
func (a admitSide) RecordTree(st *store.Store, tree launch.Tree, pre *store.Pending) {
	s := a.s
	err := s.writeLedger(st, tree)
	if err == nil {
		pre.Release()
		return
	}
	s.log.Warn("ownership ledger entry not updated with the provider's identity", zap.Error(err))
	if serr := pre.Sync(); serr != nil {
		s.log.Warn("ownership ledger entry written before the launch not synced", zap.Error(serr))
	}
	s.post(func() { s.pub.NoteLedgerFailure(err) })
}

// Started drains tree's stderr into tail, makes the ACP connection
// (events routed by routeProviderEvent) and posts both to the actor,
// which then watches the tree's exit.
func (a admitSide) Started(tree launch.Tree, tail *acpclient.StderrTail) *acpclient.Conn {
	s := a.s
	s.end.hasTree.Store(true)
	go s.drainStderr(tree.Stdio().Stderr, tail)
	conn := acpclient.NewConn(tree.Stdio().Stdin, tree.Stdio().Stdout, s.m.Config.Caps.MaxProviderLineBytes, s.log, s.routeProviderEvent,
		func() { s.m.Stats.DropUpdate() })
	conn.OnStdinClosed(func() { go s.post(func() { s.onStdinClosed(tree) }) })
	s.post(func() { s.end.tree, s.conn = tree, conn })
	go func() {
		select {
		case <-tree.Exited():
			s.post(func() { s.onExit(tree) })
		case <-s.act.quit:
		}
	}()
	return conn
}

// Replaying marks the updates that follow as replayed history
// (docs/protocol.md, resume): posted before session/load is sent, so it
// precedes every replayed update.
func (a admitSide) Replaying(drop bool) {
	s := a.s
	s.post(func() { s.turns.replaying, s.turns.replayDrop = true, drop })
}

// Cleanup is the session's cleanup (close.go) of a failed admission.
func (a admitSide) Cleanup(c launch.CleanupInput) *protocol.Proof {
	var conn agentConn // a nil *acpclient.Conn stays a nil agentConn
	if c.Conn != nil {
		conn = c.Conn
	}
	return a.s.cleanup(cleanupInput{conn: conn, tree: c.Tree, backendSessionID: c.BackendSessionID, reason: c.Reason,
		origin: protocol.OriginAdmission, closeSupported: c.CloseSupported, keepConn: c.KeepConn})
}

// CloseLate closes a late session under the retained close policy
// (Shared.retainedClose, close.go) bounded by tree's exit.
func (a admitSide) CloseLate(conn *acpclient.Conn, tree launch.Tree, backendSessionID string) cleanup.CloseResult {
	s := a.s
	return cleanup.CloseACP(s.closePolicy(s.m.retainedClose(), tree), closeSender(conn, backendSessionID))
}

// Cancelled classifies an ended admission context: the sidecar's
// shutdown, a revive no call waits for, else the host's cancel.
func (a admitSide) Cancelled(ctx context.Context) *protocol.Error {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errShutdownAbort):
		return protocol.Domain(protocol.ErrShuttingDown, "the sidecar shut down during admission", false)
	case errors.Is(cause, errReviveUnneeded):
		return reviveUnneededError()
	}
	return abortedError()
}

// drainStderr reads the provider's stderr to its end and closes it.
func (s *Actor) drainStderr(r io.ReadCloser, tail *acpclient.StderrTail) {
	// Provider stderr may echo secrets: it is read (so the provider never
	// blocks on a full pipe) and counted, never logged verbatim; its end
	// is kept while the session is admitted (acpclient.StderrTail).
	n, _ := io.Copy(tail, r)
	tail.Ended()
	_ = r.Close() // at EOF: the descriptor is released now, not when a GC finalizes it
	s.log.Debug("provider stderr closed", zap.Int64("bytes", n))
}
