package egress

import "sync/atomic"

// Budget bounds the connections forwarded at once by every session of a
// sidecar together (each holds about six of the sidecar's descriptors:
// two sockets and the two pipes of the kernel splice), so one session's
// connections — within its own limits.connections — cannot take the
// descriptors its neighbours and new opens need (adversarial trial: a
// 400-connection flood under RLIMIT_NOFILE 1024 made a neighbour's
// connection hang and a new open fail EMFILE). A nil *Budget bounds
// nothing. Safe for concurrent use.
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget is a Budget of max connections (max < 1: nil, no bound).
func NewBudget(max int) *Budget {
	if max < 1 {
		return nil
	}
	return &Budget{max: int64(max)}
}

// take reserves one connection; false when max are in use.
func (b *Budget) take() bool {
	if b == nil {
		return true
	}
	if b.used.Add(1) > b.max {
		b.used.Add(-1)
		return false
	}
	return true
}

// give returns a connection taken.
func (b *Budget) give() {
	if b != nil {
		b.used.Add(-1)
	}
}

// InUse is the connections held now (0 for nil).
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}
