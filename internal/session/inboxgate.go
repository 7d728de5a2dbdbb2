package session

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
)

// maxInboxBytes bounds the agent bytes (update objects, permission params)
// queued between one provider's read loop and its session's actor: with
// the inbox's 256 events of up to 1 MiB each, an agent whose actor falls
// behind (a slow host, a flood of large asks) could otherwise park
// hundreds of MiB there. Past the bound the read loop waits, and the
// agent's stdout pipe fills: backpressure, not memory (docs/protocol.md
// §20). One event is always let through, whatever its size.
const maxInboxBytes = 8 << 20

// postGated posts fn for an event of n agent bytes through the session's
// gate (the read loop waits while the actor has maxInboxBytes queued); fn
// must call s.gate.Release(n) when it has handled the event. False if the
// actor has stopped (the bytes are released).
func (s *Actor) postGated(n int, fn func()) bool {
	if !s.act.gate.Acquire(n, s.act.quit) {
		return false
	}
	if !s.post(fn) {
		s.act.gate.Release(n)
		return false
	}
	return true
}

// routeProviderEvent is the provider connection's read loop handing one
// event to the actor (acpclient.NewConn): through the byte gate, in wire order;
// false once the actor has quit, which ends the read loop.
func (s *Actor) routeProviderEvent(ev acpclient.Event) bool {
	switch {
	case ev.Updates != nil:
		n := 0
		for _, u := range ev.Updates {
			n += len(u.Update)
		}
		return s.postGated(n, func() {
			defer s.act.gate.Release(n)
			for _, u := range ev.Updates {
				s.onUpdate(u)
			}
			if ev.Batch != nil {
				ev.Batch.Release() // onUpdate kept none of its bytes
			}
		})
	case ev.Permission != nil:
		n := len(ev.Permission.Params)
		return s.postGated(n, func() {
			defer s.act.gate.Release(n)
			s.onPermission(ev.Permission)
		})
	case ev.Ext != nil:
		n := len(ev.Ext.Params)
		return s.postGated(n, func() {
			defer s.act.gate.Release(n)
			s.onExt(ev.Ext)
		})
	case ev.AgentMsg != nil:
		n := len(ev.AgentMsg.Params)
		return s.postGated(n, func() {
			defer s.act.gate.Release(n)
			s.onAgentMsg(ev.AgentMsg)
		})
	}
	return true
}
