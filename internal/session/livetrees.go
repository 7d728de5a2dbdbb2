package session

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The live-tree slots (--max-live-trees, docs/protocol.md §24) are
// internal/registry's LiveTrees (Shared.Trees); a launch takes one here.

// takeTreeSlot is the launch's wait for a live-tree slot, in the
// admission worker: nil holding one (s.end.slot set), or the refusal —
// SIDECAR_AT_CAPACITY (retryable, data.limit the bound) when the open's
// reviveWaitMs ran out, nil error and false when ctx ended (the caller
// reports the abort as it would without the wait).
func (s *Actor) takeTreeSlot(ctx context.Context) (bool, *protocol.Error) {
	wait := time.Duration(protocol.DefaultReviveWaitMs) * time.Millisecond
	if s.plan.Params.ReviveWaitMs != nil {
		wait = time.Duration(*s.plan.Params.ReviveWaitMs) * time.Millisecond
	}
	err := s.m.Trees.Acquire(ctx, wait)
	switch {
	case err == nil:
		s.end.slot.Store(true)
		return true, nil
	case errors.Is(err, registry.ErrNoLiveTreeSlot):
		max := s.m.Trees.Max()
		e := protocol.Domain(protocol.ErrSidecarAtCapacity, "every live-tree slot (--max-live-trees "+strconv.Itoa(max)+
			") stayed taken for reviveWaitMs; retry later", true)
		e.Data.Limit = &max
		return false, e
	}
	return false, nil
}

// releaseTreeSlot gives back the session's live-tree slot, once its tree
// is proven gone (or nothing was launched); idempotent, safe off the
// actor.
func (s *Actor) releaseTreeSlot() {
	if s.end.slot.CompareAndSwap(true, false) {
		s.m.Trees.Release()
	}
}
