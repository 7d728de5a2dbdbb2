package session

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"

	acp "github.com/coder/acp-go-sdk"
	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// cleanupHandoff is what a session hands to its cleanup
// (internal/cleanup): the tree and what the launch made for it (the
// environment marker's token, the private TMPDIR, the key's flock), the
// host's close in flight and the proof once there is one. hasTree and
// provenBeforeShutdown are read off the actor (Shutdown); abortAdmission
// is set before the actor starts; the rest is actor-owned.
type cleanupHandoff struct {
	tree launch.Tree
	// hasTree: a tree was launched (admission may still be running).
	hasTree atomic.Bool
	// slot: the session holds a live-tree slot (livetrees.go), taken by
	// the admission worker, given back once its tree is proven gone.
	slot atomic.Bool
	// proven is a close's complete proof as soon as the tree is proven
	// gone, before its publication (provstate.go): shutdown answers with
	// it when the publication outlives its bound.
	proven atomic.Pointer[protocol.Proof]
	// provenBeforeShutdown: closed with a complete proof before shutdown
	// began, so shutdown does not repeat that proof.
	provenBeforeShutdown atomic.Bool
	// abortAdmission cancels the admission.
	abortAdmission context.CancelCauseFunc
	// token is the unguessable part of the session's environment marker
	// (marker.go): never logged, journaled or reported.
	token string
	// tmpDir is the private TMPDIR made for the session ("" if none),
	// removed once the tree is proven gone (sandbox.go).
	tmpDir string
	// rules are the Landlock rules of the session's first launch, which
	// a revive's must match (launch.SetupSandbox); nil before.
	rules []sandbox.Rule
	// home is the key's private HOME given to the agent ("" if none);
	// the key's private HOME is removed after a complete proof of a close
	// with discardPersistentState, given or not (sandbox.go).
	home string
	// homeMade: the open's sandbox setup made that HOME; a failed open
	// removes it again while it is empty (admissionFailed).
	homeMade bool
	// keyHold releases the session's hold of its key's flock (keyhold.go);
	// nil before admission took it and after it was dropped.
	keyHold    func()
	pid        int // the provider's pid, kept after the tree handle is released
	exitSeen   bool
	closeReq   *closeAttempt
	closeAsked time.Time // when the host's close arrived (closeToProofMs)
	proof      *protocol.Proof
	// finished: the open failed or the session was retired: the actor
	// stops.
	finished bool
}

// closeAttempt is the one close in flight for a session; concurrent closes
// wait on it (docs/protocol.md §8 session/close: concurrent closes share one
// attempt).
type closeAttempt struct {
	waiters []Reply
	discard bool
	// reason and origin are the close's, for one that waits for an
	// admission, a retire or a revive to end first (admission.go,
	// lifecycle.go).
	reason string
	origin protocol.ProofOrigin
	// marked: the record was already marked closed (deleted when
	// markedDiscard) while the worker ran (startCleanup).
	marked, markedDiscard bool
}

// close handles session/close and shutdown on the actor. Idempotent: after
// a proof exists it is returned again.
func (s *Actor) close(reason string, origin protocol.ProofOrigin, discard bool, reply Reply) {
	if origin == protocol.OriginClose && s.end.proof == nil && s.end.closeAsked.IsZero() {
		s.end.closeAsked = time.Now() // sidecar/stats closeToProofMs
	}
	switch {
	case s.end.proof != nil && s.end.closeReq == nil && !s.state.Is(protocol.StateDead):
		s.replyProof(reply, s.end.proof)
		return
	case s.end.closeReq != nil:
		s.end.closeReq.waiters = append(s.end.closeReq.waiters, reply)
		s.end.closeReq.discard = s.end.closeReq.discard || discard
		if origin == protocol.OriginShutdown && s.state.Is(protocol.StateAdmitting, protocol.StateReviving) && s.end.abortAdmission != nil {
			// A host's close waits for an admission; shutdown does not
			// (found in review): the admission ends, and its proof
			// answers both.
			s.end.abortAdmission(errShutdownAbort)
		}
		return
	case s.state.Is(protocol.StateAdmitting):
		// Shutdown during admission: the admission ends (aborted) and its
		// proof answers this close too. A host's close waits for the
		// admission, then closes the session with its reason.
		s.end.closeReq = &closeAttempt{waiters: []Reply{reply}, discard: discard, reason: reason, origin: origin}
		if origin == protocol.OriginShutdown {
			s.end.abortAdmission(errShutdownAbort)
		}
		return
	case s.state.Is(protocol.StateRetiring, protocol.StateReviving):
		// A retire ends first (the parked session is then closed); a
		// revive is aborted, and what it launched ends.
		s.end.closeReq = &closeAttempt{waiters: []Reply{reply}, discard: discard, reason: reason, origin: origin}
		if s.state.Is(protocol.StateReviving) {
			cause := errReviveAborted
			if origin == protocol.OriginShutdown {
				cause = errShutdownAbort
			}
			s.end.abortAdmission(cause)
		}
		return
	case s.state.Is(protocol.StateDead) && s.end.proof != nil:
		// The provider died and its cleanup finished: this close only
		// marks the record.
		s.moveTo(protocol.StateClosed)
		s.markClosed(discard)
		s.replyProof(reply, s.end.proof)
		return
	}
	s.startCleanup(reason, origin, discard, reply)
}

// startCleanup runs protocol close + tree termination off the actor.
func (s *Actor) startCleanup(reason string, origin protocol.ProofOrigin, discard bool, reply Reply) {
	if s.end.closeReq == nil {
		s.end.closeReq = &closeAttempt{}
	}
	if reply != nil {
		s.end.closeReq.waiters = append(s.end.closeReq.waiters, reply)
	}
	s.end.closeReq.discard = s.end.closeReq.discard || discard
	dead := s.state.Is(protocol.StateDead)
	parked := s.state.Is(protocol.StateParked)
	s.stopIdle()
	if !dead {
		s.moveTo(protocol.StateClosing)
	}
	if s.turns.turn != nil {
		s.cancelTurn(nil, "session closing")
		s.finishTurn(protocol.PromptResult{Status: protocol.TurnCancelled, StopReason: protocol.StopCancelled})
	}
	s.endQueued(protocol.PromptResult{Status: protocol.TurnCancelled, StopReason: protocol.StopCancelled})
	in := cleanupInput{conn: s.conn, tree: s.end.tree, backendSessionID: s.rec.identity.BackendSessionID, reason: reason,
		origin: origin, closeSupported: s.rec.closeSupported, parked: parked}
	if dead || parked {
		in.backendSessionID = "" // nothing to close at protocol level
	}
	ps, st, discarding := s.rec.ps, s.rec.st, s.end.closeReq.discard
	if ps != nil {
		// What the session journaled is in the kernel, and durable, before
		// the publication reads it (provstate.go).
		s.pub.Flush()
		s.pub.SyncJournal()
	}
	go func() {
		proof := s.cleanup(in)
		if proof.Complete && ps != nil {
			// What the tree held goes now (finishCleanup does it again):
			// a publication that outlives shutdown's bound leaves no
			// ledger entry, TMPDIR or slot behind.
			s.end.proven.Store(cleanup.Copy(proof))
			_ = st.RemoveOwned(s.id)
			s.releaseSandbox()
			s.releaseTreeSlot()
			// The tree is gone: its state on disk is final (docs/protocol.md §24).
			if discarding {
				cleanup.AttachPublication(proof, s.discardState(s.m.StateCtx, ps, st))
			} else {
				cleanup.AttachPublication(proof, s.publishState(s.m.StateCtx, ps, st, true))
			}
		}
		s.post(func() { s.finishCleanup(proof) })
	}()
	if !dead {
		// A session that is not dead is marked closed whatever the proof
		// (finishCleanup); doing it now, while the worker closes the ACP
		// session and ends the tree, takes the record's write and fsyncs
		// off the path from close to proof.
		s.markClosed(s.end.closeReq.discard)
		s.end.closeReq.marked, s.end.closeReq.markedDiscard = true, s.end.closeReq.discard
	}
}

// finishCleanup adopts a cleanup's proof on the actor.
func (s *Actor) finishCleanup(proof *protocol.Proof) {
	s.log.Info("session ended", zap.String("sessionKey", s.key), zap.String("cleanupId", proof.CleanupID),
		zap.String("origin", string(proof.Origin)), zap.Bool("complete", proof.Complete), zap.Int("processes", len(proof.Processes)))
	ca := s.end.closeReq
	s.end.closeReq = nil
	s.end.proof = proof
	s.m.Stats.CountProof(proof)
	if !s.end.closeAsked.IsZero() {
		s.m.Stats.SampleClose(time.Since(s.end.closeAsked))
		s.end.closeAsked = time.Time{}
	}
	explicit := ca != nil && len(ca.waiters) > 0
	if !s.state.Is(protocol.StateDead) || explicit {
		s.moveTo(protocol.StateClosed)
		switch discard := ca != nil && ca.discard; {
		case ca == nil || !ca.marked:
			s.markClosed(discard)
		case discard && !ca.markedDiscard:
			s.markClosed(true) // a close that joined asked to discard
		}
	}
	if proof.Complete {
		_ = s.rec.st.RemoveOwned(s.id)
		if ca != nil && ca.discard && s.recordIsOurs() {
			// The key's private HOME goes with its persistent state
			// (whichever of its sessions made it); the tree is gone and
			// the key still held, so nothing writes it.
			if err := s.rec.st.RemoveHome(s.key); err != nil {
				s.log.Warn("the key's private HOME was not removed", zap.Error(err))
			}
		}
		s.releaseSandbox()
		s.releaseTreeSlot()
		s.m.Router.ReleaseKey(s)
	} else {
		s.retain(proof)
	}
	// The session is over: its network goes (an unproven tree keeps no
	// egress), its last connections' entries before the proof.
	s.endNetwork()
	s.pub.Flush()
	if !explicit {
		s.pub.Notify(protocol.NotifyCleanupProof, protocol.ProofNotice{Proof: proof})
		s.release()
		return
	}
	// The key's hold goes before the answer: a host that has the proof
	// may open the key at once, from another sidecar too.
	s.release()
	for _, w := range ca.waiters {
		s.replyProof(w, proof)
	}
}

// release drops what a cleaned-up session no longer needs — the provider
// connection with its buffers, the tree handle — keeping what status and a
// repeated close answer from, and lets the manager retire the oldest
// finished sessions.
func (s *Actor) release() {
	if s.end.tree != nil {
		s.end.pid = s.end.tree.Info().Pid
	}
	s.conn, s.end.tree, s.turns.buffered = nil, nil, nil
	s.endNetwork()
	s.m.ProvDirs.Release(s.id)
	s.pub.CloseJournal()
	s.dropKeyHold()
	s.m.Router.NoteFinished(s)
}

func (s *Actor) replyProof(reply Reply, proof *protocol.Proof) {
	if proof.Complete {
		reply(protocol.CloseResult{Proof: proof}, nil)
		return
	}
	e := protocol.Domain(protocol.ErrCleanupIncomplete, "the provider tree could not be proven gone; cleanup is retained and retried", true)
	e.Data.Proof = proof
	reply(nil, e)
}

// markClosed marks the record closed (docs/rules.md#r25) or deletes it.
func (s *Actor) markClosed(discard bool) {
	if s.rec.st == nil || s.rec.identity.BackendSessionID == "" {
		return
	}
	if discard {
		if !s.recordIsOurs() {
			return // the key was reopened since: its record and journal are not ours
		}
		if err := s.rec.st.Delete(s.key); err != nil {
			s.log.Warn("session record not deleted", zap.Error(err))
		}
		s.rec.discarded = true
		// The journal goes with the record (docs/protocol.md §16).
		s.pub.CloseJournal()
		s.pub.ForgoJournal() // and is not started again by a later notification
		if err := journal.Remove(s.rec.st.SessionsDir(), s.key); err != nil {
			s.log.Warn("session journal not deleted", zap.Error(err))
		}
		return
	}
	s.persist(func(r *store.Record) {
		r.Closed = true
		now := store.NowStamp()
		r.ClosedAt = &now
	})
}

// cleanupInput is the immutable input of one cleanup worker, copied on the
// actor (or, for a failed admission, made by the admission worker from
// what it owns).
type cleanupInput struct {
	conn agentConn   // nil: no connection
	tree launch.Tree // nil: nothing was launched
	// backendSessionID is the ACP session to close (Identity.BackendSessionID);
	// "" skips the protocol close.
	backendSessionID string
	reason           string
	origin           protocol.ProofOrigin
	// closeSupported: the agent advertised sessionCapabilities.close.
	closeSupported bool
	// keepConn closes the provider connection only after the tree is gone
	// (a late handshake may still answer).
	keepConn bool
	// parked: the session is parked (its retire proved its tree gone):
	// nothing is ended (lifecycle.go).
	parked bool
}

// cleanup closes the ACP session where the agent offers it (the live
// close policy, Shared.liveClose; skipped when no session exists,
// docs/rules.md#r5, or the agent is hung: it has taken none of a write for
// CloseTimeout), then terminates the tree and builds the proof, all
// through internal/cleanup. It blocks; it runs off the actor and reads
// only in and the session's immutable fields.
func (s *Actor) cleanup(in cleanupInput) *protocol.Proof {
	if in.parked {
		return s.parkedProof(in.reason, in.origin)
	}
	conn, tree, backendSessionID := in.conn, in.tree, in.backendSessionID
	job := cleanup.Job{Target: s.target(in.reason, in.origin), Clean: s.red.Clean}
	alive := tree != nil
	if alive {
		select {
		case <-tree.Exited():
			alive = false
		default:
		}
	}
	switch {
	case backendSessionID == "" || conn == nil || !alive:
	case !in.closeSupported:
		job.Skip = protocol.ProtocolClose{Outcome: protocol.CloseUnsupported}
	case conn.Stalled(s.m.Config.Bounds.CloseTimeout):
		// An agent that stopped reading its stdin is hung: a session/close
		// could not reach it within the bound, so the tree is ended at
		// once (docs/protocol.md §20).
		job.Skip = protocol.ProtocolClose{Outcome: protocol.CloseSkipped,
			Error: "the agent is not reading its stdin (hung): session/close not sent"}
	default:
		job.Send, job.Close = closeSender(conn, backendSessionID), s.closePolicy(s.m.liveClose(), tree)
	}
	if conn != nil && !in.keepConn {
		job.AfterClose = func() {
			conn.Drain(acpclient.DrainBound) // a $/cancel_request of a timed-out close still reaches the agent
			conn.Close()
		}
	}
	if tree != nil {
		job.Target.Containment = tree.Info().Containment
		job.Before = func() []protocol.ProofError {
			if n := launch.OOMKills(tree); n > 0 {
				return []protocol.ProofError{launch.OOMProofError(n)}
			}
			return nil
		}
		job.Terminate = s.m.terminator(tree)
	}
	proof, _ := cleanup.Run(job) // a live tree's Terminator never refuses
	if conn != nil && in.keepConn {
		conn.Close()
	}
	return proof
}

// target names this session's cleanup for internal/cleanup.
func (s *Actor) target(reason string, origin protocol.ProofOrigin) cleanup.Target {
	return cleanup.Target{Session: s.id, SessionKey: s.key, Reason: reason, Origin: origin, Containment: s.m.Config.Launcher.Mode()}
}

// closePolicy is p bounded by tree's exit, with the session's redacted
// message of an agent's error.
func (s *Actor) closePolicy(p cleanup.ClosePolicy, tree launch.Tree) cleanup.ClosePolicy {
	if tree != nil {
		p.Gone = tree.Exited()
	}
	p.Describe = func(err error) string { return launch.ACPError(s.red.Clean, "session/close", err).Message }
	return p
}

// closeSender sends ACP session/close for backendSessionID on conn.
func closeSender(conn agentConn, backendSessionID string) cleanup.Sender {
	return func() (cleanup.Call, error) {
		w, id, err := conn.Dispatch(acp.AgentMethodSessionClose, acp.CloseSessionRequest{SessionId: acp.SessionId(backendSessionID)})
		if err != nil {
			return nil, err
		}
		return waiterCall{w: &w, conn: conn, id: id}, nil
	}
}

// waiterCall is a dispatched jsonrpc2 request as a cleanup.Call (and a
// cleanup.Abandoner: the agent is sent $/cancel_request for a close the
// sidecar gave up on, docs/protocol.md §22).
type waiterCall struct {
	w    *jsonrpc2.Waiter
	conn agentConn
	id   jsonrpc2.ID
}

// Wait waits for the answer (its result is not read).
func (c waiterCall) Wait(ctx context.Context) error { return c.w.Wait(ctx, nil) }

// Abandon sends the agent $/cancel_request for this close.
func (c waiterCall) Abandon() { c.conn.CancelRequest(c.id) }

// retain hands an incomplete cleanup to a retained owner that retries
// process termination with backoff until the tree is proven gone
// (cleanup.Retain; docs/rules.md#r15, #r20), then sends the final proof
// as cleanup/proof.
func (s *Actor) retain(first *protocol.Proof) {
	tree, st := s.end.tree, s.rec.st // the worker gets copies, never the fields
	if tree == nil {
		return
	}
	s.m.Retained.Add(1)
	s.m.Stats.Retained(1)
	discarded := s.rec.discarded
	hold, _ := s.m.KeyLocks.Hold(st, s.key) // this process holds it: a reference
	go func() {
		defer s.m.Retained.Done()
		defer s.m.Stats.Retained(-1)
		proof, ok := cleanup.Retain(cleanup.Retained{First: first, Terminate: s.m.terminator(tree),
			Backoff: s.m.Backoff(), Stop: s.m.Stop, Clean: s.red.Clean})
		if !ok {
			return
		}
		_ = st.RemoveOwned(s.id)
		s.releaseSandbox()
		s.releaseTreeSlot()
		s.m.Router.ReleaseKey(s)
		s.post(func() { s.end.proof = proof })
		// The journal was deleted with a discarded record.
		s.m.PublishProof(st, proof, cleanup.Delivery{Journal: !discarded, Notify: true})
		if hold != nil {
			hold() // after the key's last journal write
		}
	}()
}

// liveClose is the close policy of a live session (host close, shutdown,
// a failed admission's own session): one closeTimeoutMs budget for every
// attempt, at most ProtocolCloseAttempts of them (docs/rules.md#r16).
func (m *Shared) liveClose() cleanup.ClosePolicy {
	return cleanup.ClosePolicy{Attempt: m.Config.Bounds.CloseTimeout, Window: m.Config.Bounds.CloseTimeout,
		Attempts: m.Config.Bounds.ProtocolCloseAttempts, Backoff: m.Backoff()}
}

// retainedClose is the close policy of a retained target (a session the
// agent created after its admission was given up): each attempt bounded
// by closeTimeoutMs, retried with backoff for no count, only until
// RetainedCloseWindow has passed or the provider is gone
// (docs/rules.md#r16, #r20).
func (m *Shared) retainedClose() cleanup.ClosePolicy {
	return cleanup.ClosePolicy{Attempt: m.Config.Bounds.CloseTimeout, Window: m.Config.Bounds.RetainedCloseWindow, Backoff: m.Backoff()}
}

// Backoff is the one cleanup backoff (retainedRetryMinMs doubling to
// retainedRetryMaxMs).
func (m *Shared) Backoff() cleanup.Backoff {
	return cleanup.Backoff{Min: m.Config.Bounds.RetainedRetryMin, Max: m.Config.Bounds.RetainedRetryMax}
}

// terminator ends tree with the configured graces.
func (m *Shared) terminator(tree launch.Tree) cleanup.Terminator {
	return func() (reaper.Termination, error) {
		return tree.Terminate(context.Background(), m.Config.Bounds.TermGrace, m.Config.Bounds.KillGrace), nil
	}
}
