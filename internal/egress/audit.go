package egress

import (
	"sync"
	"sync/atomic"
	"time"
)

// Decision is an audit entry's `decision` (docs/protocol.md §19.1).
type Decision string

const (
	// Allowed: the destination is listed; the connection was forwarded
	// (or its dial failed: Event.Reason says so).
	Allowed Decision = "allowed"
	// Denied: the destination is not listed, or a bound refused it.
	Denied Decision = "denied"
)

// Reasons of audit entries.
const (
	// ReasonNotListed: no allow entry names this destination.
	ReasonNotListed = "not listed"
	// ReasonNameNotListed: a DNS query for a name no entry admits
	// (answered NXDOMAIN).
	ReasonNameNotListed = "name not listed"
	// ReasonLimit: the session's limits.connections were all open.
	ReasonLimit = "connection limit"
	// ReasonSidecarLimit: the sidecar's connections across its sessions
	// (Budget, from its descriptor limit) were all open.
	ReasonSidecarLimit = "sidecar connection limit"
	// ReasonNames: the session's table of names is full (MaxNames).
	ReasonNames = "too many names"
	// ReasonNotTCP: a datagram (UDP, ICMP, …) to a destination outside
	// the tree: only TCP is forwarded.
	ReasonNotTCP = "not tcp"
)

// Event is one audit entry: the body of a `session/network` notification
// without the session's own members (docs/protocol.md §19.1). Allowed
// entries are made when the connection ends, one per connection; denied
// ones when the attempt is refused, at most once per destination per
// turn (Network.SetTurn).
type Event struct {
	// Destination is what the tree asked for: "name:port" for a
	// connection to a listed name, "1.2.3.4:443" or "[2001:db8::1]:443"
	// for an address, "name" for a DNS query, "udp 1.2.3.4:53" (and
	// "icmp …", "ip proto N …") for a datagram.
	Destination string
	// Decision is Allowed or Denied.
	Decision Decision
	// Reason says why a connection was denied, or why an allowed one
	// carried nothing (its dial failed); "" for a normal allowed one.
	Reason string
	// BytesOut counts bytes the tree sent to the destination, BytesIn
	// bytes it received from it (TCP payload, no headers).
	BytesOut, BytesIn int64
	// Ms is the connection's life in milliseconds, from its accept to its
	// end (0 for a denied one).
	Ms int64
	// RequestID is the turn running when the connection was accepted (""
	// outside a turn).
	RequestID string
}

// Totals are a session's counters (session/status `network`,
// docs/protocol.md §19.1): Allowed and Denied count connections and
// attempts (every one, also those whose entries were rate-limited);
// bytes count finished connections.
type Totals struct {
	// Allowed counts allowed connections that ended.
	Allowed uint64 `json:"allowed"`
	// Denied counts denied attempts, reported or not.
	Denied uint64 `json:"denied"`
	// BytesOut counts bytes the tree sent over finished connections.
	BytesOut uint64 `json:"bytesOut"`
	// BytesIn counts bytes the tree received over finished connections.
	BytesIn uint64 `json:"bytesIn"`
}

// Add adds o to t.
func (t *Totals) Add(o Totals) {
	t.Allowed += o.Allowed
	t.Denied += o.Denied
	t.BytesOut += o.BytesOut
	t.BytesIn += o.BytesIn
}

// Counters are totals shared by several sessions (sidecar/stats
// `network`, docs/protocol.md §17): every session's auditor adds to them
// as it counts. The zero value is ready; safe for concurrent use.
type Counters struct {
	allowed, denied, bytesOut, bytesIn atomic.Uint64
}

// Totals reads the counters.
func (c *Counters) Totals() Totals {
	if c == nil {
		return Totals{}
	}
	return Totals{Allowed: c.allowed.Load(), Denied: c.denied.Load(), BytesOut: c.bytesOut.Load(), BytesIn: c.bytesIn.Load()}
}

// Bounds of the auditor.
const (
	// MaxPendingEvents bounds the entries queued for the session and not
	// yet taken (TakeEvents); an entry past it is dropped and counted
	// (Network.Dropped), never blocking a forwarder.
	MaxPendingEvents = 4096
	// maxDeniedKeys bounds the destinations remembered as already
	// reported in one turn; past it, further denied attempts of that turn
	// are each reported (no longer deduplicated).
	maxDeniedKeys = 4096
)

// auditor queues events for the session, rate-limits denied ones and
// keeps the totals. Safe for concurrent use.
type auditor struct {
	wake   func()    // called (without locks) after an event was queued; never blocks
	shared *Counters // also counted there; nil = none

	allowed, denied, bytesOut, bytesIn, dropped atomic.Uint64

	mu      sync.Mutex
	pending []Event
	turn    string
	seen    map[string]struct{} // denied destinations reported this turn
}

func newAuditor(wake func()) *auditor {
	if wake == nil {
		wake = func() {}
	}
	return &auditor{wake: wake, shared: &Counters{}, seen: map[string]struct{}{}}
}

// setTurn starts a new rate-limit period: the turn requestID ("" = none).
func (a *auditor) setTurn(requestID string) {
	a.mu.Lock()
	a.turn = requestID
	clear(a.seen)
	a.mu.Unlock()
}

// currentTurn is the turn now running ("" none).
func (a *auditor) currentTurn() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.turn
}

// connected records one allowed connection that ended.
func (a *auditor) connected(dest, reason, turn string, out, in int64, d time.Duration) {
	a.allowed.Add(1)
	a.bytesOut.Add(uint64(out))
	a.bytesIn.Add(uint64(in))
	a.shared.allowed.Add(1)
	a.shared.bytesOut.Add(uint64(out))
	a.shared.bytesIn.Add(uint64(in))
	a.queue(Event{Destination: dest, Decision: Allowed, Reason: reason, BytesOut: out, BytesIn: in,
		Ms: d.Milliseconds(), RequestID: turn}, "")
}

// refused records one denied attempt; it is reported unless dest was
// already reported in this turn.
func (a *auditor) refused(dest, reason string) {
	a.denied.Add(1)
	a.shared.denied.Add(1)
	a.queue(Event{Destination: dest, Decision: Denied, Reason: reason}, dest)
}

// queue appends e (for a denied one, once per key per turn).
func (a *auditor) queue(e Event, key string) {
	a.mu.Lock()
	if key != "" {
		if _, ok := a.seen[key]; ok {
			a.mu.Unlock()
			return
		}
		if len(a.seen) < maxDeniedKeys {
			a.seen[key] = struct{}{}
		}
		// Past maxDeniedKeys destinations in a turn every further one is
		// reported, not deduplicated (a flood of junk names must not hide
		// the probe after it; adversarial trial); MaxPendingEvents still
		// bounds what waits.
		e.RequestID = a.turn
	}
	if len(a.pending) >= MaxPendingEvents {
		a.mu.Unlock()
		a.dropped.Add(1)
		return
	}
	a.pending = append(a.pending, e)
	first := len(a.pending) == 1
	a.mu.Unlock()
	if first {
		a.wake()
	}
}

// take returns and forgets the queued events.
func (a *auditor) take() []Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.pending
	a.pending = nil
	return out
}

// totals reads the counters.
func (a *auditor) totals() Totals {
	return Totals{Allowed: a.allowed.Load(), Denied: a.denied.Load(), BytesOut: a.bytesOut.Load(), BytesIn: a.bytesIn.Load()}
}
