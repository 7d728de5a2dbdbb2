package provstate

import (
	"context"
	"errors"
	"os"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Acquire is the admission worker's step for an open with a store
// (k.States, non-nil): take the key over in the store, restoring its
// archive when the local copy in st is missing or older (the local
// marker) — fetched, decrypted and verified before the head is moved
// (statestore.Store.AcquireRestore), so an open refused for a bad archive
// never fences the key's owner — before the record is read and anything
// launched; a restored journal gets the move's gap (journal/gap "moved"),
// and absolute paths the profile's Rewrites name are rewritten to srcs'
// new places (rewrite.go). srcs are the open's provider-state directories
// (Sources). It returns the lease and what was restored (nil if nothing;
// its fellBack says the head's newest archive was bad and the one before
// it restored), or the protocol's error: STATE_FENCED, STATE_CORRUPT,
// STATE_TOO_LARGE, STATE_CONFLICT or STATE_STORE_UNAVAILABLE (retryable)
// (docs/protocol.md §24).
func (k Session) Acquire(ctx context.Context, st *store.Store, prof profiles.Profile, srcs []statestore.Source) (*statestore.Lease, *protocol.Restore, *protocol.Error) {
	ss := k.States
	// Before the takeover: a sidecar whose master key cannot open the
	// key's archives must not fence the key's owner (issue 29's trial).
	if err := ss.CheckKeys(ctx, k.Key); err != nil {
		what := "the key's published state cannot be opened with this sidecar's master key"
		if errors.Is(err, statestore.ErrUnavailable) {
			// The head could not be read: nothing is known of the key
			// (a user trial read a refused S3 signature as a key problem).
			what = "the key's head could not be read from the state store"
		}
		return nil, nil, stateError(what, err)
	}
	local := localGeneration(st, k.Key)
	need := func(h statestore.Head) bool { return local != h.Archive.Generation }
	lease, r, err := ss.AcquireRestore(ctx, k.Key, need, restoreTargets(st, k.Key, srcs), st.Dir())
	if err != nil {
		what := "the key could not be taken over in the state store"
		if errors.Is(err, statestore.ErrCorrupt) || errors.Is(err, statestore.ErrTooLarge) {
			what = "the key's provider state could not be restored; the key was not taken over"
		}
		return nil, nil, stateError(what, err)
	}
	if r.Generation == 0 {
		return lease, nil, nil
	}
	out := &protocol.Restore{Generation: r.Generation, Bytes: r.FileBytes, Entries: r.Entries, Ms: r.Ms,
		Kept: append([]string{}, r.Kept...)}
	if fb := r.FellBack; fb != nil {
		// The head's newest archive was bad and the one before it was
		// restored: the last publication's changes are lost, and both the
		// host (restore.fellBack) and the operator hear it.
		k.Log.Warn("the head's archive is corrupt; its previous archive was restored (the last publication is lost)",
			zap.String("sessionKey", k.Key), zap.Int64("headGeneration", fb.Generation), zap.Int64("restoredGeneration", r.Generation))
		out.FellBack = &protocol.RestoreFellBack{Generation: fb.Generation,
			Error: protocol.ProofError{Code: protocol.ErrStateCorrupt, Message: k.clean(fb.Reason)}}
	}
	markLocal(st, k.Key, r.Generation, k.Log)
	if _, err := os.Lstat(journal.SegmentPath(st.SessionsDir(), journal.Stem(k.Key), 0)); err == nil &&
		!slices.Contains(r.Kept, journalSource+".0") {
		k.reserveMovedJournal(st) // the journal came from the archive
	}
	// Absolute paths inside the restored state that named the old place
	// (pi-acp's session map; rewrite.go).
	if changed, err := rewriteRestoredPaths(prof, srcs); err != nil {
		k.Log.Warn("restored paths not rewritten", zap.Error(err))
	} else if len(changed) > 0 {
		k.Log.Info("restored paths rewritten", zap.Int("files", len(changed)))
	}
	return lease, out, nil
}

// Publish publishes the session's provider state ps with its record and
// journal in st (docs/protocol.md §24), off the actor, serialized per
// session; nil without a store (k.States or ps's lease nil). A fenced
// lease is never used again. ctx bounds it (the sidecar's shutdown
// cancels it). treeGone says the tree was proven gone (a retire's or
// close's publication): a success then makes the store current. A
// publication whose store is current publishes nothing (skipped, no
// error): no tree ran since. A failure is the publication's state
// "failed" with the protocol's code and k.Clean'd message.
func (k Session) Publish(ctx context.Context, ps *State, st *store.Store, treeGone bool) *protocol.Publication {
	ss := k.States
	if ss == nil || ps == nil || ps.lease == nil {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.fenced {
		return &protocol.Publication{State: protocol.PublicationSkipped,
			Error: &protocol.ProofError{Code: protocol.ErrStateFenced, Message: "another sidecar owns the key now"}}
	}
	if ps.current {
		// No tree ran since the store became current (parked, or a revive
		// that ended before its launch — a close during its restore): the
		// local copy may be gone or partial, and the head already holds
		// the state (adversarial trial: such a close published an empty
		// HOME over the agent's session).
		return &protocol.Publication{State: protocol.PublicationSkipped}
	}
	start := time.Now()
	srcs := append(append([]statestore.Source{}, ps.sources...), ownSources(st, k.Key)...)
	pub, err := ss.Publish(ctx, ps.lease, srcs)
	if err != nil {
		if errors.Is(err, statestore.ErrFenced) {
			ps.fenced = true
		}
		e := stateError("the provider state was not published", err)
		k.Log.Warn("provider state not published", zap.String("code", string(e.Data.Code)))
		return &protocol.Publication{State: protocol.PublicationFailed, Ms: time.Since(start).Milliseconds(),
			Error: &protocol.ProofError{Code: e.Data.Code, Message: k.clean(e.Message)}}
	}
	markLocal(st, k.Key, pub.Generation, k.Log)
	ps.current = treeGone
	out := &protocol.Publication{State: protocol.PublicationPublished, Generation: pub.Generation, Object: pub.Object,
		Bytes: pub.Bytes, Entries: pub.Entries, SHA256: pub.SHA256, Ms: pub.Ms}
	for _, sk := range pub.Skipped {
		out.Skipped = append(out.Skipped, sk.Path)
	}
	return out
}

// Discard deletes the key's objects from the store (a close with
// discardPersistentState; docs/protocol.md §24), off the actor, and the
// local marker in st; nil without a store. The proof's publication says
// skipped, or failed with why (k.Clean'd).
func (k Session) Discard(ctx context.Context, ps *State, st *store.Store) *protocol.Publication {
	ss := k.States
	if ss == nil || ps == nil || ps.lease == nil {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	start := time.Now()
	if !ps.fenced {
		if err := ss.Discard(ctx, ps.lease); err != nil {
			if errors.Is(err, statestore.ErrFenced) {
				ps.fenced = true
			}
			e := stateError("the key's published state was not deleted", err)
			return &protocol.Publication{State: protocol.PublicationFailed, Ms: time.Since(start).Milliseconds(),
				Error: &protocol.ProofError{Code: e.Data.Code, Message: k.clean(e.Message)}}
		}
	}
	_ = os.Remove(localMarkerPath(st, k.Key))
	return &protocol.Publication{State: protocol.PublicationSkipped, Ms: time.Since(start).Milliseconds()}
}

// VerifyLease checks, before a revive launches anything, that the key's
// head is still this session's (statestore.Lease.Verify): STATE_FENCED
// when another sidecar took the key over (ps is then fenced for good); a
// store that cannot be read now is logged and the revive goes on (the
// next publication decides). nil without a store.
func (k Session) VerifyLease(ctx context.Context, ps *State) *protocol.Error {
	if ps == nil || ps.lease == nil {
		return nil
	}
	err := ps.lease.Verify(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, statestore.ErrFenced):
		ps.mu.Lock()
		ps.fenced = true
		ps.mu.Unlock()
		return stateError("the session cannot be revived", err)
	}
	k.Log.Info("the key's head could not be checked before the revive; going on", zap.Error(err))
	return nil
}
