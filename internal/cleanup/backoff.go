package cleanup

import "time"

// Backoff is the one retry backoff of cleanup: Min, doubling, capped at
// Max (docs/protocol.md §2 `--retained-retry-min-ms`,
// `--retained-retry-max-ms`). The zero value waits not at all.
type Backoff struct {
	// Min is the first wait and Max the longest; with Max 0 every wait
	// is Min.
	Min, Max time.Duration
	next     time.Duration
}

// Next is the wait before the next retry: Min the first time, then twice
// the previous, at most Max.
func (b *Backoff) Next() time.Duration {
	switch {
	case b.next == 0:
		b.next = b.Min
	case b.next < b.Max:
		b.next *= 2
	}
	if b.Max > 0 && b.next > b.Max {
		b.next = b.Max
	}
	return b.next
}

// Wait sleeps b.Next(), and reports false instead when stop closes first.
func (b *Backoff) Wait(stop <-chan struct{}) bool {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}
