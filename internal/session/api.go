package session

import (
	"context"
	"encoding/json"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The Actor's face to the Manager (internal/adapter): every host request
// the Manager routes to a session is one of these, each run on the
// actor after every command sent before it (send; mailbox.go). A reply
// to an actor that has stopped is SESSION_NOT_FOUND.

// ID is the session's id ("s-" and 16 hex digits).
func (s *Actor) ID() string { return s.id }

// Key is the session's sessionKey.
func (s *Actor) Key() string { return s.key }

// Created is when the Manager admitted the open.
func (s *Actor) Created() time.Time { return s.created }

// StateDir is the session's state dir (the open's, or --state-dir).
func (s *Actor) StateDir() string { return s.stateDir }

// ListEntry is the session as of its last state change, for
// session/list; it never waits on the actor.
func (s *Actor) ListEntry() protocol.ListEntry { return s.listEntry() }

// Start starts the actor of an admitted open: admission (the launch and
// the ACP handshake) answers reply once, then the actor serves until the
// Manager's Stop. ctx's end (or its cause) aborts the admission. Counted
// in Shared.Actors from this call.
func (s *Actor) Start(ctx context.Context, reply Reply) {
	actx, cancel := context.WithCancelCause(ctx)
	s.end.abortAdmission = cancel
	s.m.Actors.Add(1)
	go s.run(actx, reply)
}

// Prompt runs one turn (docs/protocol.md §8 session/prompt); ctx is
// cancelled by $/cancelRequest, which cancels the turn like
// session/cancel.
func (s *Actor) Prompt(ctx context.Context, p protocol.PromptParams, reply Reply) {
	s.send(reply, func() { s.withPromptAgent(ctx, p, reply) }) // lifecycle.go
}

// Cancel cancels the queued turn p.RequestID names (answered "cancelled";
// it never reaches the agent) or the active turn (ACP session/cancel);
// without a requestId, the active turn only. reply gets
// {"cancelled": bool}.
func (s *Actor) Cancel(p protocol.CancelParams, reply Reply) {
	s.send(reply, func() {
		if p.RequestID != nil && (s.cancelQueued(*p.RequestID) || s.cancelWaiting(*p.RequestID)) {
			reply(map[string]bool{"cancelled": true}, nil)
			return
		}
		reply(map[string]bool{"cancelled": s.cancelTurn(p.RequestID, "host cancel")}, nil)
	})
}

// Status answers session/status from the persisted record
// (docs/rules.md#r23), bounded by config.Config.Caps.StateRead (mailbox.go).
func (s *Actor) Status(reply Reply) { s.statusBounded(reply) }

// Close closes the session and proves its tree gone (docs/protocol.md
// §8 session/close).
func (s *Actor) Close(p protocol.CloseParams, reply Reply) {
	s.send(reply, func() { s.close(p.Reason, protocol.OriginClose, p.DiscardPersistentState, reply) })
}

// SetControl selects and verifies a model, mode or config option
// (docs/rules.md#r24): name is the model or mode id, or the option's id
// with value its value.
func (s *Actor) SetControl(kind controls.Kind, name string, value json.RawMessage, reply Reply) {
	s.send(reply, func() { s.withAgent(reply, func() { s.control(kind, name, value, reply) }) })
}

// ExtRequest sends the agent its `_…` request p.Method with p.Params
// verbatim and answers {"result": <the agent's result verbatim>}.
// Errors: SESSION_CLOSING, PROVIDER_PROCESS_LOST (no agent to ask),
// AGENT_ERROR (data.agentError: the agent's error object verbatim).
func (s *Actor) ExtRequest(p protocol.ExtRequestParams, reply Reply) {
	s.send(reply, func() {
		s.withAgent(reply, func() {
			s.callAgent(p.Method, p.Params, func(res json.RawMessage, e *protocol.Error) {
				if e != nil {
					reply(nil, e)
					return
				}
				reply(protocol.ExtRequestResult{Result: res}, nil)
			}, reply)
		})
	})
}

// ExtNotification sends the agent its `_…` notification; a session that
// is not open drops it (logged).
func (s *Actor) ExtNotification(p protocol.ExtNotificationParams) {
	s.send(func(any, error) {}, func() {
		if e := s.usable(); e != nil || s.conn == nil {
			s.log.Debug("session/extNotification dropped: the session is not open")
			return
		}
		var params any
		if len(p.Params) > 0 {
			params = p.Params
		}
		if err := s.conn.Notify(p.Method, params); err != nil {
			s.log.Debug("session/extNotification not delivered", zap.Error(err))
		}
	})
}

// AgentSessions answers the agent's ACP session/list result verbatim
// (docs/protocol.md §23). Errors: UNSUPPORTED_CONTROL when the agent
// lacks sessionCapabilities.list, AGENT_ERROR for its error, and those of
// ExtRequest.
func (s *Actor) AgentSessions(p protocol.AgentSessionsParams, reply Reply) {
	s.send(reply, func() {
		s.withAgent(reply, func() {
			if s.usable() == nil && s.rec.agentCaps.SessionCapabilities.List == nil {
				reply(nil, protocol.Domain(protocol.ErrUnsupportedControl, "the agent does not offer session/list (no sessionCapabilities.list)", false))
				return
			}
			req := map[string]any{}
			if p.Cwd != "" {
				req["cwd"] = p.Cwd
			}
			if p.Cursor != nil {
				req["cursor"] = *p.Cursor
			}
			raw, _ := json.Marshal(req)
			s.callAgent("session/list", raw, func(res json.RawMessage, e *protocol.Error) {
				if e != nil {
					reply(nil, e)
					return
				}
				reply(res, nil)
			}, reply)
		})
	})
}

// Retire marks a finished session retired: the Manager keeps answering
// status for at most its MaxFinishedSessions, and an older one's actor
// stops (SESSION_NOT_FOUND after). self is true when the session retires
// itself from its own cleanup's end (on the actor already).
func (s *Actor) Retire(self bool) {
	if self {
		s.end.finished = true
		return
	}
	go s.send(func(any, error) {}, func() { s.end.finished = true })
}

// ShutdownOutcome is one session's part of a shutdown: its final proof
// (nil: none, or the bound ran out), whether the host already has it
// (sent and journaled: a dead session's provider-exit proof, or one
// closed and proven before the shutdown) and whether it is to be
// journaled at all (the key's journal was discarded).
type ShutdownOutcome struct {
	// Proof is the session's final proof; nil when it has none or the
	// shutdown bound ran out first.
	Proof *protocol.Proof
	// Delivered: the host already has Proof (sent and journaled) or it
	// is not to be journaled (the key's journal was discarded); false
	// means the shutdown still reports it.
	Delivered bool
}

// CloseForShutdown closes the session with origin "shutdown" (unless it
// was closed and proven before) and calls done once with its outcome; a
// stopped actor calls done with none.
func (s *Actor) CloseForShutdown(done func(ShutdownOutcome)) {
	s.send(func(any, error) { done(ShutdownOutcome{}) }, func() {
		if s.state.Is(protocol.StateClosed) && s.end.proof != nil && s.end.proof.Complete {
			s.end.provenBeforeShutdown.Store(true)
			done(ShutdownOutcome{}) // closed and proven before shutdown
			return
		}
		delivered := s.state.Is(protocol.StateDead) && s.end.proof != nil // its provider-exit proof
		s.close("sidecar shutdown", protocol.OriginShutdown, false, func(r any, err error) {
			var p *protocol.Proof
			if cr, ok := r.(protocol.CloseResult); ok {
				p = cr.Proof
			} else if pe, ok := err.(*protocol.Error); ok {
				p = pe.Data.Proof
				if p == nil {
					p = pe.Data.Cleanup
				}
			}
			done(ShutdownOutcome{Proof: p, Delivered: delivered || s.rec.discarded})
		})
	})
}

// ShutdownProof is the proof a shutdown reports for a session whose
// close did not answer within the bound: nil when it launched no tree or
// was proven before the shutdown; the proof of a tree proven gone whose
// publication ran out the bound (marked so; its local state stays); else
// an incomplete proof ("shutdown bound exceeded").
func (s *Actor) ShutdownProof() *protocol.Proof {
	if !s.launched() || s.end.provenBeforeShutdown.Load() {
		return nil
	}
	if pp := s.end.proven.Load(); pp != nil {
		p := cleanup.Copy(pp)
		cleanup.AttachPublication(p, &protocol.Publication{State: protocol.PublicationFailed,
			Error: &protocol.ProofError{Code: protocol.ErrStateStoreUnavailable, Message: "the shutdown bound ran out during the publication; the local state is kept"}})
		return p
	}
	return s.incompleteProof("shutdown bound exceeded")
}

// Do runs fn on the actor after every command sent before it; commands
// sent after wait until fn returns. gone is called instead when the actor
// has stopped. It never blocks. The Manager's tests hold or order the
// actor with it.
func (s *Actor) Do(fn, gone func()) {
	s.send(func(any, error) { gone() }, fn)
}
