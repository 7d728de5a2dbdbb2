package session

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// A per-turn session's revive (docs/protocol.md §24): a parked session's
// tree launched again by the ordinary admission path, resuming the agent's
// own session, and what a failed or abandoned revive leaves. lifecycle.go
// has the rest (retire, idle retire, the calls that wait for the agent).

// errReviveAborted is the cause of a revive aborted by a host close;
// errReviveUnneeded of one whose every waiting call was cancelled.
var (
	errReviveAborted  = errors.New("the session is closing")
	errReviveUnneeded = errors.New("no call waits for the revive any more")
)

// reviveUnneededError is the (retryable) error of a revive given up
// because no call waits for it: the session is parked again.
func reviveUnneededError() *protocol.Error {
	return protocol.Domain(protocol.ErrAdmissionAborted, "no call waits for the revive any more: the session is parked again", true)
}

// startRevive launches the tree again for a parked session: the same
// command (its digest checked again), env, limits and sandbox, by the
// ordinary admission path, resuming the agent's own session.
func (s *Actor) startRevive() {
	s.moveTo(protocol.StateReviving)
	s.life.reviveStarted = time.Now()
	s.pub.Notify(protocol.NotifySessionLifecycle, protocol.LifecycleNotice{Session: s.id, SessionKey: s.key, State: protocol.LifeReviving})
	s.pub.Flush()
	ctx, cancel := context.WithCancelCause(context.Background())
	s.end.abortAdmission = cancel
	in, e := s.prepareLaunch(&launch.Revive{BackendSessionID: s.rec.identity.BackendSessionID, Pins: s.ctl.pins, State: s.rec.ps})
	if e != nil {
		cancel(nil)
		if e.RPCCode == protocol.CodeInvalidParams {
			// Not the prompt's params at fault: the open's place is gone
			// (its cwd deleted). The session stays parked.
			e = protocol.Domain(protocol.ErrEnsureFailed, "the session cannot be revived now: "+e.Message+"; it stays parked", true)
		}
		s.reviveFailed(nil, e)
		return
	}
	go func() {
		r := s.admit(ctx, in)
		cancel(nil)
		s.post(func() { s.finishRevive(r) })
	}()
}

// finishRevive adopts a revive's result on the actor: the session is live
// again (session/lifecycle live) and the waiting calls run, or the revive
// failed (reviveFailed).
func (s *Actor) finishRevive(r launch.Result) {
	s.rec.closeSupported = r.CloseSupported
	s.refillSpares() // tmpspares.go: the launch took spare files
	if r.Adm == nil {
		s.reviveFailed(r.Proof, r.Err)
		return
	}
	s.adopt(r.Adm)
	s.life.revives++
	d := time.Since(s.life.reviveStarted)
	s.life.lastRevive = &d
	s.moveTo(protocol.StateOpen)
	s.pub.Notify(protocol.NotifySessionLifecycle, protocol.LifecycleNotice{Session: s.id, SessionKey: s.key, State: protocol.LifeLive})
	for _, u := range s.turns.buffered {
		s.forward(u.Update, s.trackUpdate(u.Kind, u.Update))
	}
	s.turns.buffered = nil
	s.armHeld() // seedcontrols.go
	s.flushExtBuffered()
	s.pub.Flush()
	if ca := s.end.closeReq; ca != nil {
		s.answerWaiting(protocol.Domain(protocol.ErrSessionClosing, "the session is closing", false))
		s.startCleanup(ca.reason, ca.origin, ca.discard, nil)
		return
	}
	if s.end.exitSeen { // died between its handshake and now
		s.end.exitSeen = false
		s.onExit(s.end.tree)
	}
	s.runWaiting()
	if s.state.Is(protocol.StateOpen) && s.turns.turn == nil && len(s.turns.queue) == 0 {
		s.afterTurn() // the waiting calls needed the agent but ran no turn
	}
}

// reviveFailed ends a revive that failed with e (proof: the cleanup of
// what it launched, nil if nothing was). Nothing launched, or a failure
// worth a retry (the proof complete): the session is parked again and the
// waiting calls get e. The agent's session could not be resumed, or the
// revive's tree could not be proven gone: the session is closed and the
// waiting calls get e (SESSION_LOST with the proof).
func (s *Actor) reviveFailed(proof *protocol.Proof, e *protocol.Error) {
	if proof == nil && e.Data.Code == protocol.ErrStateFenced {
		// The key's head moved before anything launched: another sidecar
		// owns the key now (provstate.go verifyLease).
		s.treeGone()
		s.endFenced(s.parkedProof("another sidecar took the key over in the state store", protocol.OriginFenced), protocol.DuringIdle)
		return
	}
	if proof != nil {
		s.m.Stats.CountProof(proof)
		e.Data.Cleanup = proof
	}
	ca := s.end.closeReq
	retry := e.Data.Retryable && ca == nil && e.Data.Code != protocol.ErrSessionLost
	if proof == nil || (proof.Complete && retry) {
		s.treeGone()
		if ca == nil {
			s.moveTo(protocol.StateParked)
			s.pub.Notify(protocol.NotifySessionLifecycle, protocol.LifecycleNotice{Session: s.id, SessionKey: s.key,
				State: protocol.LifeParked, Error: &protocol.TurnError{Code: e.Data.Code, Message: e.Message, Retryable: e.Data.Retryable}})
			s.pub.Flush()
			s.answerWaiting(e)
			return
		}
		// A close arrived while the revive launched nothing: close the
		// parked session.
		s.moveTo(protocol.StateParked)
		s.answerWaiting(e)
		s.startCleanup(ca.reason, ca.origin, ca.discard, nil)
		return
	}
	s.log.Warn("revive failed; the session ends", zap.String("code", string(e.Data.Code)))
	if ca == nil && e.Data.Code != protocol.ErrSessionLost {
		// After its launch, a revive that fails for good has lost the
		// agent's session (docs/protocol.md §24).
		lost := protocol.Domain(protocol.ErrSessionLost, "the session could not be revived: "+e.Message, false)
		lost.Data.Cleanup, lost.Data.Causes = e.Data.Cleanup, e.Data.Causes
		e = lost
	}
	s.end.proof = proof
	s.end.closeReq = nil
	s.moveTo(protocol.StateClosed)
	s.markClosed(ca != nil && ca.discard)
	if proof.Complete {
		s.treeGone()
		s.m.Router.ReleaseKey(s)
	} else {
		s.retain(proof)
	}
	answered := len(s.life.waiting) > 0 || ca != nil
	if ca != nil {
		s.answerWaiting(protocol.Domain(protocol.ErrSessionClosing, "the session was closed while it revived", false))
	} else {
		s.answerWaiting(e)
		s.notifyEnded(e)
	}
	// Only when no call carries the proof (data.cleanup) does it go out
	// as a cleanup/proof.
	s.endWith(proof, ca, !answered)
}

// endWith finishes a session that ends outside a host close of its own
// (a lost revive, a fenced key, a retire that could not prove its tree
// gone), once its state is closed: proof goes out as cleanup/proof when
// sendProof, the queued frames are flushed, the connection, journal and
// key hold are released, and a close that joined (ca) is answered with
// the proof.
func (s *Actor) endWith(proof *protocol.Proof, ca *closeAttempt, sendProof bool) {
	if sendProof {
		s.pub.Notify(protocol.NotifyCleanupProof, protocol.ProofNotice{Proof: proof})
	}
	s.pub.Flush()
	s.release()
	if ca != nil {
		for _, w := range ca.waiters {
			s.replyProof(w, proof)
		}
	}
}

// notifyEnded tells the host that a session which had retired ended
// without a close of its own (session/lifecycle state "ended", with why).
func (s *Actor) notifyEnded(e *protocol.Error) {
	s.pub.Notify(protocol.NotifySessionLifecycle, protocol.LifecycleNotice{Session: s.id, SessionKey: s.key, State: protocol.LifeEnded,
		Error: &protocol.TurnError{Code: e.Data.Code, Message: e.Message, Retryable: e.Data.Retryable}})
}
