package session

import (
	"sync"

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

// byteGate counts the bytes of events posted and not yet handled. It has
// one waiter at most (a provider's read loop is the only poster), so a
// one-token channel is its wake-up: a release leaves a token, a waiter
// takes it and looks again (a stale token costs one more look).
type byteGate struct {
	mu   sync.Mutex
	used int
	max  int
	wake chan struct{} // one token: bytes were released
}

func newByteGate(max int) *byteGate { return &byteGate{max: max, wake: make(chan struct{}, 1)} }

// acquire waits until n more bytes fit (or nothing is queued) and takes
// them; false (nothing taken) if quit closed first. One caller at a time.
func (g *byteGate) acquire(n int, quit <-chan struct{}) bool {
	for {
		g.mu.Lock()
		if g.used == 0 || g.used+n <= g.max {
			g.used += n
			g.mu.Unlock()
			return true
		}
		g.mu.Unlock()
		select {
		case <-g.wake:
		case <-quit:
			return false
		}
	}
}

// release gives n bytes back and wakes the waiting acquire, if any.
func (g *byteGate) release(n int) {
	g.mu.Lock()
	g.used -= n
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// postGated posts fn for an event of n agent bytes through the session's
// gate (the read loop waits while the actor has maxInboxBytes queued); fn
// must call s.gate.release(n) when it has handled the event. False if the
// actor has stopped (the bytes are released).
func (s *Actor) postGated(n int, fn func()) bool {
	if !s.act.gate.acquire(n, s.act.quit) {
		return false
	}
	if !s.post(fn) {
		s.act.gate.release(n)
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
			defer s.act.gate.release(n)
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
			defer s.act.gate.release(n)
			s.onPermission(ev.Permission)
		})
	case ev.Ext != nil:
		n := len(ev.Ext.Params)
		return s.postGated(n, func() {
			defer s.act.gate.release(n)
			s.onExt(ev.Ext)
		})
	case ev.AgentMsg != nil:
		n := len(ev.AgentMsg.Params)
		return s.postGated(n, func() {
			defer s.act.gate.release(n)
			s.onAgentMsg(ev.AgentMsg)
		})
	}
	return true
}
