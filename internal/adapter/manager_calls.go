package adapter

import (
	"context"

	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// lookup is the live session id names, or nil after replying
// SESSION_NOT_FOUND.
func (m *Manager) lookup(id string, reply session.Reply) *session.Actor {
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	if s == nil {
		reply(nil, protocol.Domain(protocol.ErrSessionNotFound, "no session "+protocol.QuoteShort(id), false))
	}
	return s
}

// Prompt runs one turn (docs/protocol.md §8 session/prompt). ctx is cancelled
// by $/cancelRequest, which cancels the turn like session/cancel.
func (m *Manager) Prompt(ctx context.Context, p protocol.PromptParams, reply session.Reply) {
	if s := m.lookup(p.Session, reply); s != nil {
		s.Prompt(ctx, p, reply)
	}
}

// Cancel cancels the queued turn requestId names (it is answered
// "cancelled" and never reaches the agent) or the active turn (ACP
// session/cancel); without requestId, the active turn only.
func (m *Manager) Cancel(p protocol.CancelParams, reply session.Reply) {
	if s := m.lookup(p.Session, reply); s != nil {
		s.Cancel(p, reply)
	}
}

// Status reports a session's state from its persisted record
// (docs/rules.md#r23).
func (m *Manager) Status(p protocol.SessionRef, reply session.Reply) {
	if s := m.lookup(p.Session, reply); s != nil {
		s.Status(reply) // bounded by Config.Caps.StateRead
	}
}

// Close closes a session and proves its tree gone (docs/protocol.md §8
// session/close).
func (m *Manager) Close(p protocol.CloseParams, reply session.Reply) {
	if s := m.lookup(p.Session, reply); s != nil {
		s.Close(p, reply)
	}
}

// SetModel selects and verifies a model (docs/rules.md#r24).
func (m *Manager) SetModel(p protocol.SetModelParams, reply session.Reply) {
	if s := m.lookup(p.Session, reply); s != nil {
		s.SetControl(controls.KindModel, p.Model, nil, reply)
	}
}

// SetMode selects and verifies a mode.
func (m *Manager) SetMode(p protocol.SetModeParams, reply session.Reply) {
	if s := m.lookup(p.Session, reply); s != nil {
		s.SetControl(controls.KindMode, p.Mode, nil, reply)
	}
}

// SetConfigOption sets an ACP session config option and verifies it.
func (m *Manager) SetConfigOption(p protocol.SetConfigOptionParams, reply session.Reply) {
	if s := m.lookup(p.Session, reply); s != nil {
		s.SetControl(controls.KindOption, p.Key, p.Value, reply)
	}
}
