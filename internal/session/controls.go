package session

import (
	"context"
	"encoding/json"

	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// controlState is the session's agent controls as last reported or set
// (docs/protocol.md §10): the agent's models, modes and config options, the
// control style that sets a model, the host's pins re-applied on resume and
// the permission binding. Actor-owned; a controls worker gets a copy
// (controls.Setter).
type controlState struct {
	models     *protocol.Models
	modes      *protocol.Modes
	configOpts []json.RawMessage
	modelCtl   string
	pins       controls.Pins // the host's model and mode, re-applied on resume
	binding    protocol.PermissionBinding
	held       controls.Held     // controls held against drift (seedcontrols.go)
	final      controls.Admitted // the admission's last answers (armHeld)
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// control handles setModel/setMode/setConfigOption on the actor: the
// request runs off the actor, the result is adopted on it.
func (s *Actor) control(kind controls.Kind, name string, raw json.RawMessage, reply Reply) {
	if e := s.usable(); e != nil {
		reply(nil, e)
		return
	}
	if e := s.checkHeldControl(kind, name, raw); e != nil { // seedcontrols.go
		reply(nil, e)
		return
	}
	if mode, ok := s.modeNamed(kind, name, raw); ok {
		// A mode in which the agent decides alone would leave the policy
		// unenforced (docs/agents.md).
		if e := controls.CheckModeChange(s.plan.Profile, s.plan.Params, mode, s.ctl.modes); e != nil {
			reply(nil, e)
			return
		}
	}
	key := s.heldKey(kind, name)
	s.ctl.held.Settle(key, 1) // what the agent reports while applying it is not a breach
	// The worker's input: copies, since the actor keeps updating its own
	// models and modes in place (trackUpdate) while the request runs. The
	// worker replaces what it changes, so only a replaced value is adopted.
	models, modes := controls.CloneModels(s.ctl.models), controls.CloneModes(s.ctl.modes)
	ctl := &controls.Setter{Conn: s.conn, BackendSessionID: s.rec.identity.BackendSessionID, Models: models, Modes: modes,
		ConfigOpts: s.ctl.configOpts, UsedStyle: s.ctl.modelCtl, Clean: s.red.Clean}
	s.beginAgentCall() // lifecycle.go: no retire while it runs
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.m.Config.Bounds.HandshakeTimeout)
		defer cancel()
		e := ctl.Set(ctx, kind, name, raw)
		s.post(func() {
			defer s.endAgentCall() // once the host has its answer
			s.ctl.held.Settle(key, -1)
			if e != nil {
				reply(nil, e)
				s.checkHeld()
				return
			}
			if ctl.Models != models {
				s.ctl.models = ctl.Models
			}
			if ctl.Modes != modes {
				s.ctl.modes = ctl.Modes
			}
			s.ctl.configOpts, s.ctl.modelCtl = ctl.ConfigOpts, ctl.UsedStyle
			s.act.snapDirty = true
			// What the host selects is pinned: re-applied on resume.
			if s.ctl.models != nil && (kind == controls.KindModel || s.isOption(name, "model")) {
				s.ctl.pins.Model = s.ctl.models.CurrentModelID
			}
			if kind == controls.KindOption && !s.isOption(name, "model") && !s.isOption(name, "mode") {
				s.ctl.pins = s.ctl.pins.WithOption(name, raw) // re-applied by a revive
			}
			if mode, ok := s.modeNamed(kind, name, raw); ok {
				s.ctl.pins.Mode = mode
				// The host chose the mode: the binding now says so
				// (controls.CheckModeChange let an autonomous one through only
				// under a plain approve-all).
				if b := s.plan.Profile.Binding; len(b.AskModes) > 0 {
					s.ctl.binding = protocol.PermissionBinding{Bound: b.Asks(mode), Mode: mode, Via: controls.ViaHostMode, Autonomous: !b.Asks(mode)}
				} else {
					s.ctl.binding.Mode = mode // bound by launch settings, or not at all
				}
			}
			s.heldAfterControl(key)
			s.checkHeld()
			s.persist(nil)
			s.pub.Flush() // the updates the agent sent before its answer go first
			switch kind {
			case controls.KindModel:
				reply(map[string]any{"models": s.ctl.models}, nil)
			case controls.KindMode:
				reply(map[string]any{"modes": s.ctl.modes}, nil)
			default:
				reply(map[string]any{"configOptions": s.ctl.configOpts}, nil)
			}
		})
	}()
}

// modeNamed returns the mode a control request selects: the name of a
// setMode, or the value of a setConfigOption whose option is the mode.
func (s *Actor) modeNamed(kind controls.Kind, name string, raw json.RawMessage) (string, bool) {
	return controls.ModeNamed(s.ctl.configOpts, kind, name, raw)
}

// isOption reports whether config option id is the one of category cat.
func (s *Actor) isOption(id, cat string) bool {
	return controls.IsOption(s.ctl.configOpts, id, cat)
}

// usable returns the error for a request that needs a live session.
func (s *Actor) usable() *protocol.Error {
	switch s.state.Current() {
	case protocol.StateAdmitting:
		return protocol.Domain(protocol.ErrSessionNotFound, "the session is still being admitted", true)
	case protocol.StateClosing, protocol.StateClosed:
		return protocol.Domain(protocol.ErrSessionClosing, "the session is closing or closed", false)
	case protocol.StateDead:
		return protocol.Domain(protocol.ErrProviderProcessLost, "the provider process is gone", false)
	case protocol.StateRetiring, protocol.StateParked, protocol.StateReviving:
		// Calls that need the agent wait for a revive (withAgent); what
		// cannot wait is refused, retryable.
		return protocol.Domain(protocol.ErrSessionNotFound, "the session's tree is not running ("+string(s.state.Current())+"); a prompt revives it", true)
	}
	if s.turns.lostInTurn {
		// The connection died during a turn and the exit is not seen yet:
		// the session is as good as dead, and answers as it will then.
		return protocol.Domain(protocol.ErrProviderProcessLost, "the provider process is gone", false)
	}
	return nil
}
