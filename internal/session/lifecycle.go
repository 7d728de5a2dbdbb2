package session

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/provstate"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// lifecycle is the session's part of docs/protocol.md §24 (PROTOCOL
// §10.1): a per-turn session's tree lives for its admission and each turn;
// once a turn has ended and nothing is queued the session retires (the
// ordinary cleanup path, origin "retire", then parked), and the next call
// that needs the agent revives it (the ordinary admission path, resume or
// load only). A warm session with idleRetireMs retires the same way once
// idle that long. Actor-owned.
type lifecycle struct {
	mode       protocol.LifecycleMode
	idleRetire time.Duration // warm only; 0: never
	idle       *time.Timer
	idleGen    uint64 // a timer of an older generation fired too late: ignored
	// idleDue: the idle bound passed while a call to the agent was in
	// flight; the retire waits for the last such call to settle.
	idleDue bool
	// agentCalls counts the requests sent to the agent outside a turn's
	// own prompt that have not settled yet (a host's control, extension
	// request or session/list, the sidecar's restore of a held control).
	// The agent's connection is theirs until they do: no retire starts
	// while one runs (beginAgentCall, endAgentCall).
	agentCalls int
	// waiting are the calls that need the agent, held while the session
	// retires, is parked or revives; they run in arrival order once it is
	// live, or are answered the revive's error.
	waiting          []waitingCall
	retires, revives int
	lastRevive       *time.Duration
	reviveStarted    time.Time
}

// waitingCall is one host call held for the agent: run does it (its own
// checks included), reply answers it if it never runs.
type waitingCall struct {
	reply Reply
	run   func()
	// requestID is a waiting prompt's (session/cancel may answer it).
	requestID string
}

// newLifecycle is the lifecycle an open asks for (nil: warm).
func newLifecycle(l *protocol.Lifecycle) lifecycle {
	lc := lifecycle{mode: protocol.LifecycleWarm}
	if l == nil {
		return lc
	}
	lc.mode = l.Mode
	if l.IdleRetireMs != nil {
		lc.idleRetire = time.Duration(*l.IdleRetireMs) * time.Millisecond
	}
	return lc
}

// withAgent runs a host call that needs the agent: now when the session is
// anything but retiring, parked or reviving (run then does its own
// checks); otherwise it waits, and a parked session starts its revive.
func (s *Actor) withAgent(reply Reply, run func()) {
	s.whenLive(waitingCall{reply: reply, run: run})
}

// whenLive runs c now, or holds it for the agent (withAgent).
func (s *Actor) whenLive(c waitingCall) {
	switch s.state.Current() {
	case protocol.StateParked:
		s.life.waiting = append(s.life.waiting, c)
		s.startRevive()
	case protocol.StateRetiring, protocol.StateReviving:
		s.life.waiting = append(s.life.waiting, c)
	default:
		c.run()
	}
}

// answerWaiting answers every waiting call with e.
func (s *Actor) answerWaiting(e *protocol.Error) {
	w := s.life.waiting
	s.life.waiting = nil
	for _, c := range w {
		c.reply(nil, e)
	}
}

// runWaiting runs the waiting calls in order, on a live session.
func (s *Actor) runWaiting() {
	w := s.life.waiting
	s.life.waiting = nil
	for _, c := range w {
		c.run()
	}
}

// canRevive reports whether the agent can resume its session in a new
// process: it offers session/resume or session/load.
func (s *Actor) canRevive() bool {
	c := s.rec.agentCaps
	return c.LoadSession || c.SessionCapabilities.Resume != nil
}

// afterTurn is called when a turn has ended (its result sent): a per-turn
// session retires if nothing else is due, a warm one with idleRetireMs
// arms its idle timer.
func (s *Actor) afterTurn() {
	if s.life.mode == protocol.LifecyclePerTurn {
		s.retireIfIdle("the turn ended (per-turn)")
		return
	}
	if s.plan.Params.Publish == protocol.PublishTurn && s.rec.ps != nil && s.state.Is(protocol.StateOpen, protocol.StateTurn) {
		s.publishTurn() // provstate.go
	}
	s.armIdle()
}

// afterOpen is called once an open is answered: a per-turn session whose
// agent session already ran a turn (a resumed one) retires at once; one
// that never ran a turn keeps its tree until its first turn ends, since
// some agents cannot resume a session without one (codex-acp 2.x;
// docs/agents.md). A warm session arms its idle timer.
func (s *Actor) afterOpen() {
	if s.life.mode == protocol.LifecyclePerTurn {
		if s.turns.lastReqID != nil {
			s.retireIfIdle("admitted (per-turn)")
		}
		return
	}
	s.armIdle()
}

// retireIfIdle starts a retire when the session is open and idle: no turn,
// nothing queued or waiting, no call to the agent in flight, no close in
// flight, its provider alive and able to resume, the sidecar not shutting
// down.
func (s *Actor) retireIfIdle(why string) {
	if !s.state.Is(protocol.StateOpen) || s.turns.turn != nil || len(s.turns.queue) > 0 || len(s.life.waiting) > 0 || s.life.agentCalls > 0 ||
		s.end.closeReq != nil || s.end.exitSeen || s.turns.lostInTurn || s.conn == nil || s.end.tree == nil || !s.canRevive() {
		return
	}
	closing := s.m.Router.Closing()
	if closing {
		return
	}
	s.startRetire(why)
}

// armIdle (re)starts a warm session's idle timer (idleRetireMs). A session
// that never ran a turn is not retired idle: some agents cannot resume a
// session without one (codex-acp 2.x; docs/agents.md).
func (s *Actor) armIdle() {
	if s.life.idleRetire <= 0 || !s.state.Is(protocol.StateOpen) || s.turns.lastReqID == nil {
		return
	}
	s.stopIdle()
	gen := s.life.idleGen
	s.life.idle = time.AfterFunc(s.life.idleRetire, func() {
		s.post(func() {
			if s.life.idleGen == gen {
				s.life.idleDue = true // kept only while a call to the agent holds the retire off
				s.retireIfIdle("idle for idleRetireMs")
			}
		})
	})
}

// stopIdle stops the idle timer; a timer that already fired is made stale.
func (s *Actor) stopIdle() {
	s.life.idleGen++
	s.life.idleDue = false
	if s.life.idle != nil {
		s.life.idle.Stop()
		s.life.idle = nil
	}
}

// beginAgentCall counts a request about to be sent to the agent outside a
// turn's prompt, on a live session; endAgentCall must follow exactly once,
// on the actor, when it has settled.
func (s *Actor) beginAgentCall() { s.life.agentCalls++ }

// endAgentCall settles one call to the agent. When it was the last, the
// retire it held off may start now: a per-turn session that ran a turn
// (revived for the call, or whose turn ended meanwhile) retires once idle,
// as after a turn; a warm one whose idle bound passed meanwhile does too.
func (s *Actor) endAgentCall() {
	s.life.agentCalls--
	if s.life.agentCalls > 0 || !s.state.Is(protocol.StateOpen) {
		return
	}
	switch {
	case s.life.mode == protocol.LifecyclePerTurn && s.turns.lastReqID != nil:
		s.retireIfIdle("the call to the agent ended (per-turn)")
	case s.life.idleDue:
		s.retireIfIdle("idle for idleRetireMs")
	}
}

// startRetire ends the tree by the ordinary cleanup path (ACP close by the
// close policy, then the tree, proof origin "retire") off the actor; the
// session is retiring until finishRetire.
func (s *Actor) startRetire(why string) {
	s.stopIdle()
	s.moveTo(protocol.StateRetiring)
	s.pub.Flush()
	s.pub.SyncJournal() // everything the turn journaled is durable before the tree goes
	in := cleanupInput{conn: s.conn, tree: s.end.tree, backendSessionID: s.rec.identity.BackendSessionID, reason: why,
		origin: protocol.OriginRetire, closeSupported: s.rec.closeSupported}
	ps, st := s.rec.ps, s.rec.st
	drop := s.privateStateDirs(ps)
	go func() {
		proof := s.cleanup(in)
		if proof.Complete && ps != nil {
			// Published once the tree is gone, before the session is
			// parked (docs/protocol.md §24).
			pub := s.publishState(s.m.StateCtx, ps, st, true)
			cleanup.AttachPublication(proof, pub)
			if pub != nil && pub.State == protocol.PublicationPublished {
				s.dropLocalState(st, drop)
			}
		}
		s.post(func() { s.finishRetire(proof) })
	}()
}

// finishRetire adopts a retire's proof. Complete: what the tree held is
// released (ledger entry, sandbox, live-tree slot), the session is parked
// and the host told (cleanup/proof, session/lifecycle parked); a close
// that arrived meanwhile now closes the parked session, and waiting calls
// start the revive. Incomplete: the tree may still run, so the session
// cannot revive; it ends closed like a close with an incomplete proof
// (retained, the key held until the tree is proven gone).
func (s *Actor) finishRetire(proof *protocol.Proof) {
	s.m.Stats.CountProof(proof)
	if !proof.Complete {
		s.log.Warn("retire could not prove the tree gone; the session ends")
		s.end.proof = proof
		s.moveTo(protocol.StateClosed)
		s.markClosed(false)
		s.retain(proof)
		ended := protocol.Domain(protocol.ErrSessionClosing, "the session ended: its retired tree could not be proven gone", false)
		s.answerWaiting(ended)
		s.notifyEnded(ended)
		ca := s.end.closeReq
		s.end.closeReq = nil
		s.endWith(proof, ca, true)
		return
	}
	s.treeGone()
	if provstate.Fenced(proof) {
		s.endFenced(proof, protocol.DuringIdle)
		return
	}
	s.life.retires++
	s.persist(func(r *store.Record) { r.Pid, r.AgentStartedAt = nil, nil })
	s.moveTo(protocol.StateParked)
	s.pub.Notify(protocol.NotifyCleanupProof, protocol.ProofNotice{Proof: proof})
	s.pub.Notify(protocol.NotifySessionLifecycle, protocol.LifecycleNotice{Session: s.id, SessionKey: s.key,
		State: protocol.LifeParked, Proof: proof})
	s.pub.Flush()
	if ca := s.end.closeReq; ca != nil {
		s.answerWaiting(protocol.Domain(protocol.ErrSessionClosing, "the session is closing", false))
		s.startCleanup(ca.reason, ca.origin, ca.discard, nil)
		return
	}
	if len(s.life.waiting) > 0 {
		s.startRevive()
	}
}

// treeGone releases what the session's tree held once it is proven gone
// and the session lives on (a retire, a revive that failed but may be
// retried): the ledger entry, the sandbox (its private TMPDIR), the
// live-tree slot, the connection and the tree handle.
func (s *Actor) treeGone() {
	if err := s.rec.st.RemoveOwned(s.id); err != nil {
		s.log.Warn("ledger entry not removed", zap.Error(err))
	}
	s.releaseSandbox()
	s.end.tmpDir = ""
	s.releaseTreeSlot()
	if s.end.tree != nil {
		s.end.pid = s.end.tree.Info().Pid
	}
	s.conn, s.end.tree, s.end.exitSeen = nil, nil, false
	s.turns.lostInTurn = false
}

// lifecycleStatus is session/status `lifecycle`.
func (s *Actor) lifecycleStatus() *protocol.LifecycleStatus {
	st := protocol.LifeLive
	switch s.state.Current() {
	case protocol.StateRetiring:
		st = protocol.LifeRetiring
	case protocol.StateParked:
		st = protocol.LifeParked
	case protocol.StateReviving:
		st = protocol.LifeReviving
	case protocol.StateClosing, protocol.StateClosed, protocol.StateDead:
		st = protocol.LifeEnded
	}
	ls := &protocol.LifecycleStatus{Mode: s.life.mode, State: st, Retires: s.life.retires, Revives: s.life.revives}
	if d := s.life.lastRevive; d != nil {
		ms := d.Milliseconds()
		ls.LastReviveMs = &ms
	}
	if s.life.idleRetire > 0 {
		ms := s.life.idleRetire.Milliseconds()
		ls.IdleRetireMs = &ms
	}
	return ls
}

// parkedProof is the proof of closing a parked session: nothing runs, so
// nothing is ended (docs/protocol.md §24).
func (s *Actor) parkedProof(reason string, origin protocol.ProofOrigin) *protocol.Proof {
	return cleanup.NothingRunning(s.target(reason, origin), time.Now())
}

// withPromptAgent runs session/prompt through withAgent, remembering its
// requestId while it waits so session/cancel can answer it (docs/protocol.md
// §24: a prompt revives a parked session).
func (s *Actor) withPromptAgent(ctx context.Context, p protocol.PromptParams, reply Reply) {
	if s.state.Is(protocol.StateParked, protocol.StateRetiring, protocol.StateReviving) {
		// What startTurn would refuse is refused now, before a revive
		// launches the agent for nothing (issue 29's trial).
		dup := s.turns.usedIDs[p.RequestID]
		for _, c := range s.life.waiting {
			dup = dup || (c.requestID != "" && c.requestID == p.RequestID)
		}
		if dup {
			reply(nil, protocol.Domain(protocol.ErrDuplicateRequestID, "requestId "+protocol.QuoteShort(p.RequestID)+" was already used in this session or an earlier session of its key", false))
			return
		}
		if _, e := acpclient.PromptBlocks(p.Prompt, s.rec.agentCaps); e != nil {
			reply(nil, e)
			return
		}
	}
	s.whenLive(waitingCall{reply: reply, run: func() { s.startTurn(ctx, p, reply) }, requestID: p.RequestID})
}

// cancelWaiting answers the waiting prompt requestID names `cancelled`
// (it never reaches the agent); false if none waits.
func (s *Actor) cancelWaiting(requestID string) bool {
	for i, c := range s.life.waiting {
		if c.requestID == requestID && requestID != "" {
			s.life.waiting = append(s.life.waiting[:i], s.life.waiting[i+1:]...)
			s.m.Stats.CountTurn(protocol.TurnCancelled)
			c.reply(protocol.PromptResult{RequestID: requestID, Status: protocol.TurnCancelled, StopReason: protocol.StopCancelled}, nil)
			if len(s.life.waiting) == 0 && s.state.Is(protocol.StateReviving) {
				s.end.abortAdmission(errReviveUnneeded) // nothing needs the agent now
			}
			return true
		}
	}
	return false
}
