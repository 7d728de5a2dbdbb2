package adapter

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// liveTrees bounds the provider trees alive at once (--max-live-trees,
// docs/protocol.md §24): an open or a revive takes a slot before it
// launches and gives it back once its tree is proven gone, so admitted
// sessions may far exceed live trees. A launch that finds every slot taken
// waits, in arrival order (FIFO), at most its open's reviveWaitMs; a
// released slot goes straight to the oldest waiter. Safe for concurrent
// use; it starts no goroutine.
type liveTrees struct {
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

// errNoLiveTreeSlot is acquire's error when the wait ran out.
var errNoLiveTreeSlot = errors.New("no live-tree slot within the wait")

// acquire takes a slot, waiting at most wait (FIFO behind earlier
// waiters). It returns nil holding a slot; errNoLiveTreeSlot when the wait
// ran out; ctx's cause when ctx ended first (an aborted open or revive).
func (t *liveTrees) acquire(ctx context.Context, wait time.Duration) error {
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
		err = errNoLiveTreeSlot
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

// release gives a slot back: to the oldest waiter if there is one, else
// to the pool.
func (t *liveTrees) release() {
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

// counts reports the slots held and the launches waiting.
func (t *liveTrees) counts() (live, waiting int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n, len(t.waiters)
}

// takeTreeSlot is the launch's wait for a live-tree slot, in the
// admission worker: nil holding one (s.end.slot set), or the refusal —
// SIDECAR_AT_CAPACITY (retryable, data.limit the bound) when the open's
// reviveWaitMs ran out, nil error and false when ctx ended (the caller
// reports the abort as it would without the wait).
func (s *session) takeTreeSlot(ctx context.Context) (bool, *protocol.Error) {
	wait := time.Duration(protocol.DefaultReviveWaitMs) * time.Millisecond
	if s.open.ReviveWaitMs != nil {
		wait = time.Duration(*s.open.ReviveWaitMs) * time.Millisecond
	}
	err := s.m.trees.acquire(ctx, wait)
	switch {
	case err == nil:
		s.end.slot.Store(true)
		return true, nil
	case errors.Is(err, errNoLiveTreeSlot):
		max := s.m.trees.max
		e := protocol.Domain(protocol.ErrSidecarAtCapacity, "every live-tree slot (--max-live-trees "+itoa(max)+
			") stayed taken for reviveWaitMs; retry later", true)
		e.Data.Limit = &max
		return false, e
	}
	return false, nil
}

// releaseTreeSlot gives back the session's live-tree slot, once its tree
// is proven gone (or nothing was launched); idempotent, safe off the
// actor.
func (s *session) releaseTreeSlot() {
	if s.end.slot.CompareAndSwap(true, false) {
		s.m.trees.release()
	}
}
