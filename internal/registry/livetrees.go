package registry

import (
	"context"
	"errors"
	"sync"
	"time"
)

// LiveTrees bounds the provider trees alive at once (--max-live-trees,
// docs/protocol.md §24 "--max-live-trees and reviveWaitMs"): an open or a
// revive takes a slot before it launches and gives it back once its tree
// is proven gone, so admitted sessions may far exceed live trees. A launch
// that finds every slot taken waits, in arrival order (FIFO), at most its
// open's reviveWaitMs; a released slot goes straight to the oldest waiter.
// Make one with NewLiveTrees; safe for concurrent use; it starts no
// goroutine.
type LiveTrees struct {
	mu      sync.Mutex
	max     int // ≤ 0: no bound (slots are still counted)
	n       int // slots held
	waiters []*treeWaiter
}

// treeWaiter is one launch waiting for a slot; granted (under mu) means
// release handed it the slot and closed ready.
type treeWaiter struct {
	ready   chan struct{}
	granted bool
}

// ErrNoLiveTreeSlot is Acquire's error when the wait ran out (the
// session answers SIDECAR_AT_CAPACITY, internal/session/livetrees.go;
// docs/protocol.md §24).
var ErrNoLiveTreeSlot = errors.New("no live-tree slot within the wait")

// NewLiveTrees returns a LiveTrees of max slots (≤ 0: no bound; slots are
// still counted).
func NewLiveTrees(max int) *LiveTrees { return &LiveTrees{max: max} }

// Max is the bound NewLiveTrees was given (≤ 0: none).
func (t *LiveTrees) Max() int { return t.max }

// Acquire takes a slot, waiting at most wait (FIFO behind earlier
// waiters). It returns nil holding a slot; ErrNoLiveTreeSlot when the wait
// ran out; ctx's cause when ctx ended first (an aborted open or revive).
func (t *LiveTrees) Acquire(ctx context.Context, wait time.Duration) error {
	t.mu.Lock()
	if t.max <= 0 || (t.n < t.max && len(t.waiters) == 0) {
		t.n++
		t.mu.Unlock()
		return nil
	}
	w := &treeWaiter{ready: make(chan struct{})}
	t.waiters = append(t.waiters, w)
	t.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var err error
	select {
	case <-w.ready:
		return nil
	case <-timer.C:
		err = ErrNoLiveTreeSlot
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.granted { // handed over while the wait ended: it is ours
		return nil
	}
	for i, x := range t.waiters {
		if x == w {
			t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
			break
		}
	}
	return err
}

// Release gives a slot back: to the oldest waiter if there is one, else
// to the pool.
func (t *LiveTrees) Release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.waiters) > 0 {
		w := t.waiters[0]
		t.waiters[0] = nil
		t.waiters = t.waiters[1:]
		w.granted = true
		close(w.ready)
		return
	}
	if t.n > 0 {
		t.n--
	}
}

// Counts reports the slots held and the launches waiting (sidecar/stats
// liveTrees, docs/protocol.md §17).
func (t *LiveTrees) Counts() (live, waiting int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n, len(t.waiters)
}
