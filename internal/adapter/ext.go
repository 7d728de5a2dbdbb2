package adapter

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// ExtRequest routes session/extRequest to its session (session.Actor.ExtRequest).
// Errors: SESSION_NOT_FOUND, and the session's.
func (m *Manager) ExtRequest(p protocol.ExtRequestParams, reply session.Reply) {
	if s := m.lookup(p.Session, reply); s != nil {
		s.ExtRequest(p, reply)
	}
}

// ExtNotification routes session/extNotification to its session; one
// that is gone drops it.
func (m *Manager) ExtNotification(p protocol.ExtNotificationParams) {
	m.mu.Lock()
	s := m.sessions[p.Session]
	m.mu.Unlock()
	if s != nil {
		s.ExtNotification(p)
	}
}

// AgentSessions routes session/agentSessions to its session
// (session.Actor.AgentSessions). Errors: SESSION_NOT_FOUND, and the
// session's.
func (m *Manager) AgentSessions(p protocol.AgentSessionsParams, reply session.Reply) {
	if s := m.lookup(p.Session, reply); s != nil {
		s.AgentSessions(p, reply)
	}
}
