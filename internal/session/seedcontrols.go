package session

import (
	"context"
	"encoding/json"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The session's side of the seed's held controls (internal/controls,
// seed.go and held.go; docs/protocol.md §24, "Effort, thinking and policy
// breaches"; docs/agents.md, "Drift"): an agent that moves one ends its
// turn as a policy breach, audited, and the sidecar sets it back before
// the next prompt.

// heldKey is the held-control key a control request touches.
func (s *Actor) heldKey(kind controls.Kind, name string) string {
	return controls.HeldKey(s.ctl.configOpts, kind, name)
}

// heldCurrent is what the agent last reported for a held control.
func (s *Actor) heldCurrent(key string) (string, bool) {
	return controls.Current(s.ctl.configOpts, s.ctl.modes, key)
}

// armHeld starts holding the controls once the updates buffered during an
// admission were replayed: the admission's final answers (snapshot) are
// newer than any of them, so the controls go back to those first.
func (s *Actor) armHeld() {
	snap := s.ctl.final
	if snap.ConfigOpts != nil {
		s.ctl.configOpts = snap.ConfigOpts
	}
	if snap.Modes != nil && s.ctl.modes != nil {
		s.ctl.modes.CurrentModeID = snap.Modes.CurrentModeID
	}
	s.ctl.held.Armed = true
	s.checkHeld()
}

// checkHeld compares every held control with what the agent reports; the
// first that moved (and is not being set by a request in flight) is a
// breach.
func (s *Actor) checkHeld() {
	if s.conn == nil || !s.state.Is(protocol.StateOpen, protocol.StateTurn) {
		// Closing, closed or parked: no agent to set back (a control's
		// answer can land after release dropped the connection; found
		// in review).
		return
	}
	if k, want, got, ok := s.ctl.held.Drift(s.heldCurrent); ok {
		s.breach(k, want, got)
	}
}

// breach ends the turn of a session whose agent moved held control key
// from want to got (POLICY_BREACH), then sets it back and verifies it off
// the actor; the audit (session/policyBreach) says whether that worked.
// Until it has, prompts are refused POLICY_BREACH.
func (s *Actor) breach(key, want, got string) {
	s.ctl.held.Breach = key
	var rid *string
	msg := "the agent moved " + protocol.QuoteShort(key) + " from " + protocol.QuoteShort(want) + " to " + s.red.Clean(protocol.QuoteShort(got)) +
		", which the sidecar holds (docs/agents.md, Drift)"
	s.log.Warn("policy breach", zap.String("control", key))
	if t := s.turns.turn; t != nil {
		r := t.requestID
		rid = &r
		t.failErr = &protocol.TurnError{Code: protocol.ErrPolicyBreach, Message: msg}
		s.cancelTurn(&t.requestID, "policy breach")
	}
	ctl := &controls.Setter{Conn: s.conn, BackendSessionID: s.rec.identity.BackendSessionID, Models: controls.CloneModels(s.ctl.models),
		Modes: controls.CloneModes(s.ctl.modes), ConfigOpts: s.ctl.configOpts, UsedStyle: s.ctl.modelCtl, Clean: s.red.Clean}
	s.ctl.held.Settle(key, 1)
	s.beginAgentCall() // lifecycle.go: no retire while it runs
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.m.Config.Bounds.HandshakeTimeout)
		defer cancel()
		e := ctl.Restore(ctx, key, want)
		s.post(func() {
			defer s.endAgentCall()
			s.ctl.held.Settle(key, -1)
			restored := e == nil
			if restored {
				s.ctl.configOpts = ctl.ConfigOpts
				if ctl.Modes != nil {
					s.ctl.modes = ctl.Modes
				}
				s.ctl.held.Breach = ""
			} else {
				s.ctl.held.Failed = true
			}
			s.act.snapDirty = true
			s.pub.Notify(protocol.NotifySessionPolicyBreach, protocol.PolicyBreachNotice{Session: s.id, RequestID: rid,
				Control: key, Held: want, Reported: s.red.Clean(got), Restored: restored})
			s.checkHeld()
		})
	}()
}

// checkHeldControl judges a host's control request against the held
// controls before it is sent: a never-mode is refused; an asking option
// moved off its asking value under a policy that needs asking is
// PERMISSION_POLICY_UNENFORCEABLE.
func (s *Actor) checkHeldControl(kind controls.Kind, name string, raw json.RawMessage) *protocol.Error {
	mode, ok := s.modeNamed(kind, name, raw)
	return controls.CheckHeldControl(s.plan.Profile, s.plan.Params, kind, name, raw, mode, ok)
}

// heldAfterControl updates the held controls after a host's control
// request succeeded: the value the host chose is held from now on (a
// mode only while it asks; the request was judged by
// controls.CheckModeChange).
func (s *Actor) heldAfterControl(key string) {
	s.ctl.held.AfterControl(key, s.heldCurrent, s.plan.Profile.Binding)
}

// slashRefusal refuses a prompt that starts with "/" for a profile that
// guards them, unless the open allowed them (docs/agents.md, Copilot).
func (s *Actor) slashRefusal(prompt json.RawMessage) *protocol.Error {
	return controls.SlashRefusal(s.plan.Profile, s.plan.Params, prompt)
}
