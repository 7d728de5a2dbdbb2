package adapter

import "sync"

// maxInboxBytes bounds the agent bytes (update objects, permission params)
// queued between one provider's read loop and its session's actor: with
// the inbox's 256 events of up to 1 MiB each, an agent whose actor falls
// behind (a slow host, a flood of large asks) could otherwise park
// hundreds of MiB there. Past the bound the read loop waits, and the
// agent's stdout pipe fills: backpressure, not memory (docs/protocol.md
// §19). One event is always let through, whatever its size.
const maxInboxBytes = 8 << 20

// byteGate counts the bytes of events posted and not yet handled.
type byteGate struct {
	mu   sync.Mutex
	used int
	max  int
	wake chan struct{} // closed and replaced at every release
}

func newByteGate(max int) *byteGate { return &byteGate{max: max, wake: make(chan struct{})} }

// acquire waits until n more bytes fit (or nothing is queued) and takes
// them; false (nothing taken) if quit closed first.
func (g *byteGate) acquire(n int, quit <-chan struct{}) bool {
	for {
		g.mu.Lock()
		if g.used == 0 || g.used+n <= g.max {
			g.used += n
			g.mu.Unlock()
			return true
		}
		w := g.wake
		g.mu.Unlock()
		select {
		case <-w:
		case <-quit:
			return false
		}
	}
}

// release gives n bytes back and wakes a waiting acquire.
func (g *byteGate) release(n int) {
	g.mu.Lock()
	g.used -= n
	close(g.wake)
	g.wake = make(chan struct{})
	g.mu.Unlock()
}

// postGated posts fn for an event of n agent bytes through the session's
// gate (the read loop waits while the actor has maxInboxBytes queued);
// false if the actor has stopped.
func (s *session) postGated(n int, fn func()) bool {
	if !s.gate.acquire(n, s.quit) {
		return false
	}
	if !s.post(func() { defer s.gate.release(n); fn() }) {
		s.gate.release(n)
		return false
	}
	return true
}
