package provstate

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
// revive brings it back from the store before its launch.

// PrivateDirs are the provider-state directories of ps that lie in the
// key's private HOME home (docs/protocol.md §19), as paths relative to it
// ("." for the HOME itself: the generic profile's $HOME); nil when ps or
// home is empty. A published retire of a per-turn session whose open named
// no stateDirs removes them (PROTOCOL §10.2; the caller decides that).
func PrivateDirs(ps *State, home string) []string {
	if ps == nil || home == "" {
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

// DropLocal removes the private-HOME provider state of a retire whose
// publication was read back (rels: PrivateDirs), so a parked session
// holds no disk there, and forgets the local marker: the next revive
// restores the key's archive (RestoreForRevive). Removal goes beneath the
// state dir st's handle, never through a link; failures are logged.
func (k Session) DropLocal(st *store.Store, rels []string) {
	if len(rels) == 0 {
		return
	}
	_ = os.Remove(localMarkerPath(st, k.Key)) // first: a half-removed state is never taken for current
	for _, rel := range rels {
		var err error
		if rel == "." {
			err = st.RemoveHome(k.Key)
		} else {
			err = st.RemoveInHome(k.Key, rel)
		}
		if err != nil {
			k.Log.Warn("provider state in the private HOME not removed after publication", zap.Error(err))
		}
	}
}

// RestoreForRevive is a revive's step with a store (the admission
// worker's, before the launch): when the local provider state in st is
// not the head's generation (a published retire removed it, DropLocal),
// the head's archive is restored with the session's own lease, keeping
// what is there (the record and journal, kept current by this sidecar).
// nil without a store; else the protocol's error as Acquire's.
func (k Session) RestoreForRevive(ctx context.Context, ps *State, st *store.Store) *protocol.Error {
	ss := k.States
	if ss == nil || ps == nil || ps.lease == nil {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	h := ps.lease.Head()
	if h.Archive == nil || localGeneration(st, k.Key) == h.Archive.Generation {
		return nil
	}
	r, err := ss.Restore(ctx, ps.lease, restoreTargets(st, k.Key, ps.sources), st.Dir())
	if err != nil {
		return stateError("the key's provider state could not be restored for the revive", err)
	}
	if r.Generation != 0 {
		if r.FellBack != nil {
			k.Log.Warn("the head's archive is corrupt; its previous archive was restored (the last publication is lost)",
				zap.String("sessionKey", k.Key), zap.Int64("headGeneration", r.FellBack.Generation), zap.Int64("restoredGeneration", r.Generation))
		}
		markLocal(st, k.Key, r.Generation, k.Log)
	}
	return nil
}
