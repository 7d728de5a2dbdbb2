package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/actor"
	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/lifestate"
	"github.com/acpx-sidecar/acpx-sidecar/internal/outbox"
	"github.com/acpx-sidecar/acpx-sidecar/internal/redact"
	"github.com/acpx-sidecar/acpx-sidecar/internal/usage"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Actor is one session's actor. Fields below "actor-owned" are touched only
// by the goroutine running run(); everything else reaches it by sending a
// closure to mb (host requests; mailbox.go) or inbox (provider events and
// worker results, in provider order). The fields above it are set before the
// actor starts and never change (but for the atomics, which are shared on
// purpose), so workers may read them; a worker gets everything else as an
// input value copied on the actor (launch.Input, cleanupInput, controls)
// and hands its result back with post.
type Actor struct {
	m       *Shared
	id      string
	key     string
	agent   string
	created time.Time
	log     *zap.Logger
	red     *redact.Redactor

	// stateDir is the open's stateDir (absolute; --state-dir when the
	// open gave none).
	stateDir string

	// plan is the open's admission plan (internal/admission): the
	// params, profile, limits and base environment every launch uses.
	plan admission.Plan

	// act is the actor's loop: its mailboxes and published snapshot
	// (mailbox.go); shared with senders by design.
	act actorLoop
	// end is what cleanup needs: the tree, the close in progress, the
	// proof (close.go); its atomics are read off the actor.
	end cleanupHandoff

	// actor-owned
	state lifestate.Machine // changed only by moveTo (state.go)
	conn  agentConn         // nil: none (agentconn.go)
	rec   sessionRecord     // the agent's session and its record (record.go)
	ctl   controlState      // models, modes, config options, pins (controls.go)
	turns turnState         // the turn, the queue, what arrives around them (turnstate.go)
	pub   *outbox.Publisher // journal and frames for the host (notify.go)
	life  lifecycle         // per-turn retire and revive, idle retire (lifecycle.go)
	egr   sessionEgress     // the allow list's network namespace (egress.go)
	// acct: usage and cost (internal/usage).
	acct usage.Accounting
}

// New makes the actor of an admitted open (plan: admission.Derive) with
// id (NewID("s-")) and the Manager's Shared; Start starts it.
func New(m *Shared, id string, plan admission.Plan) *Actor {
	p := plan.Params
	s := &Actor{m: m, id: id, key: p.SessionKey, stateDir: p.StateDir, agent: p.Agent, created: time.Now(),
		log: m.Log.With(zap.String("session", id)), red: redact.New(plan.Secrets), plan: plan,
		act:   actorLoop{mb: actor.NewMailbox(), inbox: make(chan func(), 256), gate: actor.NewByteGate(maxInboxBytes), quit: make(chan struct{})},
		end:   cleanupHandoff{token: newToken()},
		state: lifestate.New(protocol.StateAdmitting),
		turns: turnState{usedIDs: map[string]bool{}, toolTurns: map[string]string{}},
		life:  newLifecycle(p.Lifecycle)}
	s.pub = s.newPublisher()
	s.publish()
	return s
}

// send runs fn on the actor, after every command sent before it; it never
// blocks. If the actor has stopped (or stops before fn runs), reply gets
// SESSION_NOT_FOUND.
func (s *Actor) send(reply Reply, fn func()) {
	if !s.act.mb.Put(reply, fn) {
		reply(nil, s.goneError())
	}
}

func (s *Actor) goneError() *protocol.Error {
	return protocol.Domain(protocol.ErrSessionNotFound, "session "+s.id+" is gone", false)
}

// post delivers a provider event or worker result in order; false if the
// actor has stopped.
func (s *Actor) post(fn func()) bool {
	select {
	case s.act.inbox <- fn:
		return true
	case <-s.act.quit:
		return false
	}
}

func (s *Actor) launched() bool { return s.end.hasTree.Load() }

// run is the actor loop. It starts admission and serves until the manager
// stops.
func (s *Actor) run(ctx context.Context, reply Reply) {
	defer s.m.Actors.Done()
	defer func() {
		for _, r := range s.act.mb.Close() {
			r(nil, s.goneError()) // commands that will never run
		}
	}()
	defer close(s.act.quit)
	defer s.dropKeyHold() // after the journal is closed
	defer s.pub.CloseJournal()
	s.startAdmission(ctx, reply)
	for !s.end.finished {
		select {
		case <-s.act.mb.Ready():
			if fn := s.act.mb.Take(); fn != nil {
				fn()
				s.act.snapDirty = true
			}
		case fn := <-s.act.inbox:
			fn()
		case <-s.m.Stop:
			s.stop()
			return
		}
		// Queued frames go out once the inbox is drained (a burst of
		// updates shares one journal write) or the batch is full.
		if s.pub.FlushDue(len(s.act.inbox) == 0) {
			s.pub.Flush()
		}
		if s.act.snapDirty && len(s.act.inbox) == 0 {
			s.publish()
		}
	}
}

// stop releases what the actor still holds when the manager stops it.
func (s *Actor) stop() {
	s.pub.Flush()
	s.endQueued(protocol.PromptResult{Status: protocol.TurnFailed, Error: &protocol.TurnError{
		Code: protocol.ErrShuttingDown, Message: "the sidecar shut down before the turn started"}})
	if s.turns.turn != nil {
		s.finishTurn(protocol.PromptResult{Status: protocol.TurnFailed, Error: &protocol.TurnError{
			Code: protocol.ErrShuttingDown, Message: "the sidecar shut down during the turn"}})
	}
	s.stopIdle()
	s.answerWaiting(protocol.Domain(protocol.ErrShuttingDown, "the sidecar shut down before the session could revive", false))
	if s.conn != nil {
		s.conn.Close()
	}
}

// onUpdate handles one ACP session/update from the provider: u.BackendSessionID is
// params.sessionId's contents (nil or empty: not given), u.Update the raw
// params.update object, forwarded verbatim (cleaned by acpclient's line stream).
func (s *Actor) onUpdate(u acpclient.Update) {
	if s.rec.identity.BackendSessionID != "" && len(u.BackendSessionID) > 0 && string(u.BackendSessionID) != s.rec.identity.BackendSessionID {
		s.log.Debug("session/update for another ACP session discarded")
		return
	}
	switch {
	case s.turns.replaying && s.turns.replayDrop:
		return // a revive's load replays what was journaled live already
	case s.turns.replaying:
		s.pub.JournalHistory(u.Update) // docs/protocol.md §11: replay is not live output; §16: journaled as history
		return
	case s.state.Is(protocol.StateAdmitting, protocol.StateReviving):
		// Kept past the batch, whose buffer is reused: copied.
		s.turns.buffered = append(s.turns.buffered, acpclient.Update{Update: bytes.Clone(u.Update), Kind: u.Kind})
		return
	case s.state.Is(protocol.StateClosing, protocol.StateClosed, protocol.StateDead, protocol.StateRetiring, protocol.StateParked):
		return // the turn was ended by close or retire; nothing more is live output
	}
	s.forward(u.Update, s.trackUpdate(u.Kind, u.Update))
}

// forward sends one update to the host with the next seq.
//
// origin, when not nil, is the requestId the update belongs to although it
// arrives outside that turn (a tool call of a cancelled turn reporting
// later; trackUpdate).
func (s *Actor) forward(update json.RawMessage, origin *string) {
	seq := s.pub.NextSeq()
	rid := []byte("null")
	switch {
	case origin != nil:
		rid = jsonString(*origin)
	case s.turns.turn != nil:
		rid = s.turns.turn.ridJSON
	}
	s.pub.EmitUpdate(rid, seq, update)
}

// trackUpdate keeps the model/mode/config state the agent reports, and the
// turn each tool call started in: it returns that turn's requestId for a
// tool_call_update arriving in another turn or between turns (codex-acp
// 2.x keeps running a cancelled turn's command and reports it later;
// docs/agents.md), else nil. kind is the update's sessionUpdate, as the
// line scan read it (acpclient.KindOf).
func (s *Actor) trackUpdate(kind acpclient.UpdateKind, update json.RawMessage) *string {
	if kind == acpclient.KindOther {
		// Message and thought chunks, plans, commands: nothing to keep,
		// and no decoding on the path of the bulk of a turn.
		return nil
	}
	u, ok := acpclient.DecodeTracked(update)
	if !ok {
		return nil
	}
	s.act.snapDirty = true // status reports modes, options, usage
	switch kind {
	case acpclient.KindToolCall:
		s.turns.toolCallStarted(u.ToolCallID)
		s.turns.noteToolKind(u.ToolCallID, u.ToolKind)
	case acpclient.KindToolCallUpdate:
		s.turns.noteToolKind(u.ToolCallID, u.ToolKind)
		return s.turns.toolCallUpdated(u.ToolCallID, u.Status)
	case acpclient.KindModeUpdate:
		if s.ctl.modes != nil && u.CurrentModeID != "" {
			s.ctl.modes.CurrentModeID = u.CurrentModeID
		}
		s.checkHeld() // a drift from a held control is a breach (seedcontrols.go)
	case acpclient.KindConfigUpdate:
		if u.ConfigOptions != nil {
			s.applyConfigOptions(u.ConfigOptions)
		}
		s.checkHeld()
	case acpclient.KindUsageUpdate:
		// ACP UsageUpdate.cost is the session's cumulative cost: the turn's
		// cost is its growth since the turn began (docs/rules.md#r30).
		s.acct.UsageUpdate((*usage.ReportedCost)(u.Cost), u.Used, u.Size)
		if s.turns.turn == nil && (u.Cost != nil || u.Used != nil) {
			s.persist(nil) // between turns: nothing else will persist it soon
		}
		if s.turns.turn != nil && u.Cost != nil {
			s.turns.turn.cost = usage.TurnCost(usage.ReportedCost(*u.Cost), s.turns.turn.costBase)
		}
	}
	return nil
}

// onExit handles the exit of tree's leader seen by the reaper; a tree the
// session no longer runs (retired, or replaced by a revive's) is ignored.
func (s *Actor) onExit(tree launch.Tree) {
	if s.end.exitSeen || tree == nil || tree != s.end.tree {
		return
	}
	s.end.exitSeen = true
	if s.state.Is(protocol.StateClosing, protocol.StateClosed, protocol.StateAdmitting, protocol.StateRetiring, protocol.StateReviving) {
		return // the close, retire or admission worker owns cleanup
	}
	st := tree.ExitStatus()
	s.providerLost(protocol.ExitedNotice{ExitCode: st.Code, Signal: st.Signal, Reason: launch.ExitReason(st, launch.OOMKills(tree))},
		"the provider process exited", "provider exited")
}

// onStdinClosed handles a write that found tree's stdin closed (EPIPE):
// the agent lives on but nothing can reach it any more, so the turn fails
// at once and the tree is ended by the close policy, as for an exit
// (session/exited reason "stdin-closed"; issue 33). During an admission or
// revive the connection is closed, so the handshake fails at once and its
// own cleanup ends the tree.
func (s *Actor) onStdinClosed(tree launch.Tree) {
	if s.end.exitSeen || tree == nil || tree != s.end.tree {
		return
	}
	switch {
	case s.state.Is(protocol.StateAdmitting, protocol.StateReviving):
		if s.conn != nil {
			s.conn.Close()
		}
		return
	case !s.state.Is(protocol.StateOpen, protocol.StateTurn):
		return // a close or retire is ending the tree already
	}
	s.end.exitSeen = true
	s.providerLost(protocol.ExitedNotice{Reason: protocol.ExitStdinClosed}, "the agent closed its stdin", "the agent closed its stdin")
}

// providerLost ends a session whose provider can no longer be used (n:
// how; what: "the provider process exited" in the turn errors; reason the
// proof's): session/exited, queued and active turns failed
// PROVIDER_PROCESS_LOST, state dead, the tree ended by the close policy
// (proof origin provider-exit).
func (s *Actor) providerLost(n protocol.ExitedNotice, what, reason string) {
	during := protocol.DuringIdle
	if s.turns.turn != nil || s.turns.lostInTurn {
		during = protocol.DuringTurn
	}
	s.log.Warn("provider lost", zap.String("during", string(during)), zap.String("why", reason))
	n.Session, n.SessionKey, n.Pid, n.During = s.id, s.key, s.end.tree.Info().Pid, during
	s.pub.Notify(protocol.NotifySessionExited, n)
	s.endQueued(protocol.PromptResult{Status: protocol.TurnFailed, Error: &protocol.TurnError{
		Code: protocol.ErrProviderProcessLost, Message: what + " before the turn started"}})
	if s.turns.turn != nil {
		s.finishTurn(protocol.PromptResult{Status: protocol.TurnFailed, Error: &protocol.TurnError{
			Code: protocol.ErrProviderProcessLost, Message: what + " during the turn"}})
	}
	s.moveTo(protocol.StateDead)
	if s.life.mode == protocol.LifecyclePerTurn || s.life.retires > 0 {
		s.notifyEnded(protocol.Domain(protocol.ErrProviderProcessLost, what, false)) // revive.go
	}
	s.startCleanup(reason, protocol.OriginProviderExit, false, nil)
}

func (s *Actor) summary() string {
	state := s.state.Current()
	return fmt.Sprintf("session=%s backendSessionId=%s agentSessionId=%s %s", s.key,
		s.rec.identity.BackendSessionID, s.rec.identity.AgentSessionID, state)
}

// listEntry is the session's entry in session/list, as of its last state
// change (the snapshot: it never waits on the actor).
func (s *Actor) listEntry() protocol.ListEntry {
	return s.act.snap.Load().entry
}

// incompleteProof is used by Shutdown for a session whose close did not
// answer within the bound; it reads only immutable fields.
func (s *Actor) incompleteProof(why string) *protocol.Proof {
	return cleanup.Incomplete(s.target(why, protocol.OriginShutdown), why, time.Now())
}
