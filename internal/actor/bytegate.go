package actor

import "sync"

// ByteGate counts the bytes of events posted to an actor and not yet
// handled, and holds the poster back while a bound is reached. It has one
// waiter at most (a provider's read loop is the only poster), so a
// one-token channel is its wake-up: a Release leaves a token, a waiter
// takes it and looks again (a stale token costs one more look). Make one
// with NewByteGate.
type ByteGate struct {
	mu   sync.Mutex
	used int
	max  int
	wake chan struct{} // one token: bytes were released
}

// NewByteGate returns a gate that lets max bytes through (one event is
// always let through, whatever its size).
func NewByteGate(max int) *ByteGate { return &ByteGate{max: max, wake: make(chan struct{}, 1)} }

// Acquire waits until n more bytes fit (or nothing is held) and takes
// them; false (nothing taken) if quit closed first. One caller at a time.
func (g *ByteGate) Acquire(n int, quit <-chan struct{}) bool {
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

// Release gives n bytes back (n as acquired) and wakes the waiting
// Acquire, if any. Safe from any goroutine.
func (g *ByteGate) Release(n int) {
	g.mu.Lock()
	g.used -= n
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}
