package session

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The actor's calls on the Manager's registries (internal/registry):
// its spare TMPDIRs, its live-tree slot and its state dir under the live
// sandboxes' lock.

// Spare private TMPDIRs and the spare files of the stores are made ahead
// of need by internal/registry (TmpSpares, SpareRefills); a sandboxed open
// takes one in launch.SetupSandbox.

// refillSpares asks for the session's store's spare files and, when the
// session got a private TMPDIR, the Manager's spare TMPDIRs to be
// refilled: called once the open is answered, when their creates no
// longer delay it.
func (s *Actor) refillSpares() {
	var tmp *registry.TmpSpares
	if s.end.tmpDir != "" { // only a sidecar that makes private TMPDIRs keeps spares of them
		tmp = s.m.TmpSpares
	}
	s.m.Refills.Request(s.rec.st, tmp)
}

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

// A state dir is never writable to a sandboxed agent (docs/protocol.md
// §19): every state dir this sidecar uses when a sandbox is set up is
// protected in it (admission.SandboxConfig.SandboxPaths). A state dir first used later would not
// be, by the domains of the trees already running, so an open naming one
// that a live sandboxed tree can write — beneath its cwd, HOME, TMPDIR or
// sandbox.writable, and not kept read-only there — is refused
// SANDBOX_CONFLICT (found by a fresh-user trial: one agent rewrote another
// session's record); so is one that holds such a path (a writable root
// inside a state dir). Shared.Sandboxes (internal/registry's Sandboxes) holds
// what each live sandboxed tree may write; launch.SetupSandbox registers it under
// the same lock under which it reads the state dirs, and an open checks
// its state dir and only then registers it as one of this sidecar's, under
// that lock (openStateDir).

// openStateDir is Router.StoreFor(dir), unless a live sandboxed tree other than
// self's can write in dir (Sandboxes.CheckStateDirLocked: e set, nothing
// opened, so a refused dir never becomes one of this sidecar's state
// dirs). The check and the store's registration happen under m.Sandboxes's
// lock, under which launch.SetupSandbox reads the state dirs and registers its
// tree: either that tree's domain protects dir, or this open sees the
// tree. err is StoreFor's.
func (m *Shared) openStateDir(dir string, self *Actor) (st *store.Store, e *protocol.Error, err error) {
	m.Sandboxes.Lock()
	defer m.Sandboxes.Unlock()
	if e := m.Sandboxes.CheckStateDirLocked(dir, self.id); e != nil {
		return nil, e, nil
	}
	st, err = m.Router.StoreFor(dir)
	return st, nil, err
}
