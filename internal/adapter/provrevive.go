package adapter

import (
	"context"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The per-turn side of portable provider state (docs/protocol.md §24):
// what a published retire drops from the key's private HOME, and how a
// revive brings it back from the store before its launch. provstate.go
// has the rest (sources, ownership, publication, markers).

// privateStateDirs are the provider-state directories a published retire
// of this per-turn session removes (PROTOCOL §10.2): those its profile
// named (never the open's own stateDirs) that lie in the key's private
// HOME (docs/protocol.md §19), as paths relative to it ("." for the HOME
// itself: the generic profile's $HOME). nil otherwise. On the actor.
func (s *session) privateStateDirs(ps *providerState) []string {
	home := s.end.home
	if ps == nil || home == "" || s.life.mode != protocol.LifecyclePerTurn || len(s.open.StateDirs) > 0 {
		return nil
	}
	var out []string
	for _, src := range ps.sources {
		if rel, err := filepath.Rel(home, src.Path); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			out = append(out, rel)
		}
	}
	return out
}

// dropLocalState removes the private-HOME provider state of a retire
// whose publication was read back (rels: privateStateDirs), so a parked
// session holds no disk there, and forgets the local marker: the next
// revive restores the key's archive (restoreForRevive). Removal goes
// beneath the state dir's handle, never through a link.
func (s *session) dropLocalState(st *store.Store, rels []string) {
	if len(rels) == 0 {
		return
	}
	_ = os.Remove(localMarkerPath(st, s.key)) // first: a half-removed state is never taken for current
	for _, rel := range rels {
		var err error
		if rel == "." {
			err = st.RemoveHome(s.key)
		} else {
			err = st.RemoveInHome(s.key, rel)
		}
		if err != nil {
			s.log.Warn("provider state in the private HOME not removed after publication", zap.Error(err))
		}
	}
}

// restoreForRevive is a revive's step with a store (the admission
// worker's, before the launch): when the local provider state is not the
// head's generation (a published retire removed it, dropLocalState), the
// head's archive is restored with the session's own lease, keeping what
// is there (the record and journal, kept current by this sidecar).
func (s *session) restoreForRevive(ctx context.Context, ps *providerState, st *store.Store) *protocol.Error {
	ss := s.m.stateStore()
	if ss == nil || ps == nil || ps.lease == nil {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	h := ps.lease.Head()
	if h.Archive == nil || localGeneration(st, s.key) == h.Archive.Generation {
		return nil
	}
	r, err := ss.Restore(ctx, ps.lease, s.restoreTargets(st, ps.sources), st.Dir())
	if err != nil {
		return stateError("the key's provider state could not be restored for the revive", err)
	}
	if r.Generation != 0 {
		if r.Generation != h.Archive.Generation {
			s.log.Warn("the head's archive is corrupt; its previous archive was restored (the last publication is lost)",
				zap.String("sessionKey", s.key), zap.Int64("headGeneration", h.Archive.Generation), zap.Int64("restoredGeneration", r.Generation))
		}
		markLocal(st, s.key, r.Generation, s.log)
	}
	return nil
}
