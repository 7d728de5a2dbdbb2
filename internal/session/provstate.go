package session

import (
	"context"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/provstate"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Portable provider state (docs/protocol.md §24, after PROTOCOL §10.2):
// with --state-store, an open takes ownership of its key in the store
// (statestore.Store.Acquire) and restores the key's published archive
// before the launch when the local copy is missing or older; a retire and
// a close publish the agent's provider-state directories with the key's
// record and journal, once the tree is proven gone. The bytes, the
// crypto and the fencing are internal/statestore's; what each step does
// and what the host is told are internal/provstate's. This file gathers
// the steps' inputs off the session and drives the actor around them (a
// fenced ending, a turn's publication).

// stateStore is the configured state store, nil without one.
func (m *Shared) stateStore() *statestore.Store { return m.Config.StateStore }

// provSession is what internal/provstate's steps read off the session and
// its Manager (immutable fields: safe off the actor).
func (s *Actor) provSession() provstate.Session {
	return provstate.Session{States: s.m.stateStore(), Key: s.key, Log: s.log, Clean: s.red.Clean,
		JournalMaxBytes: s.m.Config.Caps.JournalMaxBytes}
}

// acquireState is the admission worker's step for an open with a store
// (provstate.Session.Acquire): the lease and what was restored (nil if
// nothing).
func (s *Actor) acquireState(ctx context.Context, in *launch.Input) (*statestore.Lease, *protocol.Restore, *protocol.Error) {
	return s.provSession().Acquire(ctx, in.Store, in.Prof, in.StateSources)
}

// publishState publishes the session's provider state with its record
// and journal (provstate.Session.Publish), off the actor; nil without a
// store.
func (s *Actor) publishState(ctx context.Context, ps *provstate.State, st *store.Store, treeGone bool) *protocol.Publication {
	return s.provSession().Publish(ctx, ps, st, treeGone)
}

// discardState deletes the key's objects from the store
// (provstate.Session.Discard), off the actor.
func (s *Actor) discardState(ctx context.Context, ps *provstate.State, st *store.Store) *protocol.Publication {
	return s.provSession().Discard(ctx, ps, st)
}

// storeStatus is session/status `store` (provstate.Status); nil without a
// store.
func (s *Actor) storeStatus() *protocol.StoreStatus { return provstate.Status(s.rec.ps) }

// endFenced ends a session whose key another sidecar took over in the
// store, once its tree is proven gone (proof): session/exited reason
// "fenced", the proof as cleanup/proof, the session closed; it never
// publishes again (docs/protocol.md §24). The record is marked closed
// here; the new owner's head is untouched.
func (s *Actor) endFenced(proof *protocol.Proof, during protocol.During) {
	s.log.Warn("another sidecar took the key over in the state store; the session ends")
	s.end.proof = proof
	s.moveTo(protocol.StateClosed)
	s.markClosed(false)
	s.m.Router.ReleaseKey(s)
	s.pub.Notify(protocol.NotifySessionExited, protocol.ExitedNotice{Session: s.id, SessionKey: s.key, Pid: s.end.pid,
		During: during, Reason: protocol.ExitFenced})
	e := protocol.Domain(protocol.ErrStateFenced, "another sidecar took the session's key over in the state store; the session ended", false)
	s.answerWaiting(e)
	if s.life.retires > 0 || s.life.mode == protocol.LifecyclePerTurn {
		s.notifyEnded(e)
	}
	ca := s.end.closeReq
	s.end.closeReq = nil
	s.endWith(proof, ca, ca == nil) // a close's answer carries the proof
}

// publishTurn publishes after a turn of a warm session whose open asked
// for publish "turn" (docs/protocol.md §24), while its tree runs: what
// the agent is writing at that moment may be caught mid-write (a retire's
// or close's publication, after the tree is gone, is the consistent one).
func (s *Actor) publishTurn() {
	ps, st := s.rec.ps, s.rec.st
	s.pub.Flush()
	s.pub.SyncJournal()
	go func() {
		pub := s.publishState(s.m.StateCtx, ps, st, false)
		s.post(func() { s.turnPublished(pub) })
	}()
}

// turnPublished adopts a turn's publication: a fenced one ends the session
// (session/exited reason "fenced", its tree ended and proven gone, proof
// origin "fenced"); any other failure is logged, and the next publication
// tries again.
func (s *Actor) turnPublished(pub *protocol.Publication) {
	if pub == nil || pub.Error == nil {
		return
	}
	if pub.Error.Code != protocol.ErrStateFenced || !s.state.Is(protocol.StateOpen, protocol.StateTurn) {
		s.log.Info("provider state of the turn not published; the next publication tries again", zap.String("code", string(pub.Error.Code)))
		return
	}
	during := protocol.DuringIdle
	if s.turns.turn != nil {
		during = protocol.DuringTurn
	}
	pid := s.end.pid
	if s.end.tree != nil {
		pid = s.end.tree.Info().Pid
	}
	s.pub.Notify(protocol.NotifySessionExited, protocol.ExitedNotice{Session: s.id, SessionKey: s.key, Pid: pid,
		During: during, Reason: protocol.ExitFenced})
	s.startCleanup("another sidecar took the key over in the state store", protocol.OriginFenced, false, nil)
}

// verifyLease checks, before a revive launches anything, that the key's
// head is still this session's (provstate.Session.VerifyLease).
func (s *Actor) verifyLease(ctx context.Context, ps *provstate.State) *protocol.Error {
	return s.provSession().VerifyLease(ctx, ps)
}

// Which directories are a session's provider state (docs/protocol.md §24):
// resolved from the open or the agent's profile, refused where an archive
// must never read or a restore write, and held by one live session at a
// time. internal/provstate resolves and checks them, and publishes and
// restores them.

// stateSources resolves the open's provider-state directories in the
// launch environment env and refuses those no archive may carry
// (provstate.Sources): the session's own private HOME (s.end.home, set by
// setupSandbox first) is the one place under a state dir allowed. One
// another live session of this sidecar uses is refused too
// (Shared.ProvDirs.Claim).
func (s *Actor) stateSources(env []string) ([]statestore.Source, *protocol.Error) {
	return provstate.Sources(provstate.Dirs{Named: s.plan.Params.StateDirs, Profile: s.plan.Profile, Env: env, Cwd: s.plan.Params.Cwd,
		PrivateHome: s.end.home, StateDirs: s.m.stateDirs(s.stateDir), Secrets: s.m.Config.StateSecrets})
}
