package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Portable provider state (docs/protocol.md §24, after PROTOCOL §10.2):
// with --state-store, an open takes ownership of its key in the store
// (statestore.Store.Acquire) and restores the key's published archive
// before the launch when the local copy is missing or older; a retire and
// a close publish the agent's provider-state directories with the key's
// record and journal, once the tree is proven gone. The bytes, the
// crypto and the fencing are internal/statestore's; this file decides
// when, and what the host is told.

// providerState is the session's part of it. lease and sources are set by
// the admission worker before the actor adopts the admission and never
// change after; mu serializes the workers that publish (a retire's, a
// close's, a turn's), which are the only users of the lease besides
// status (statestore.Lease is safe for concurrent use).
type providerState struct {
	mu      sync.Mutex
	lease   *statestore.Lease
	sources []statestore.Source // the agent's provider-state dirs (not the record and journal)
	fenced  bool                // under mu: another sidecar took the key over
	// current (under mu): the store holds the provider state as it is
	// now — published after the tree was proven gone, and no tree ran
	// since — so a parked session's close has nothing new to publish.
	current bool
}

// ownSourceNames are the archive names of the key's record and journal
// segments.
const (
	recordSource  = "acpx-record"
	journalSource = "acpx-journal"
)

// stateStore is the configured state store, nil without one.
func (m *Manager) stateStore() *statestore.Store { return m.cfg.StateStore }

// ownSources are the key's record and its journal's existing segments.
func (s *session) ownSources(st *store.Store) []statestore.Source {
	out := []statestore.Source{{Name: recordSource, Path: st.RecordPath(s.key)}}
	stem := journal.Stem(s.key)
	for i := 0; i < journal.Segments; i++ {
		p := journal.SegmentPath(st.SessionsDir(), stem, i)
		if _, err := os.Lstat(p); err == nil {
			out = append(out, statestore.Source{Name: journalSource + "." + strconv.Itoa(i), Path: p})
		}
	}
	return out
}

// restoreTargets maps every archive name this session can place to its
// path here: the provider-state dirs, the record and journal segments.
func (s *session) restoreTargets(st *store.Store, srcs []statestore.Source) map[string]string {
	t := map[string]string{recordSource: st.RecordPath(s.key)}
	stem := journal.Stem(s.key)
	for i := 0; i < journal.Segments; i++ {
		t[journalSource+"."+strconv.Itoa(i)] = journal.SegmentPath(st.SessionsDir(), stem, i)
	}
	for _, src := range srcs {
		t[src.Name] = src.Path
	}
	return t
}

// stateError maps a statestore error to the protocol's (what names the
// step, e.g. "the key's state could not be restored").
func stateError(what string, err error) *protocol.Error {
	switch {
	case errors.Is(err, statestore.ErrFenced):
		return protocol.Domain(protocol.ErrStateFenced, what+": another sidecar owns the key now", false)
	case errors.Is(err, statestore.ErrCorrupt):
		return protocol.Domain(protocol.ErrStateCorrupt, what+": "+err.Error(), false)
	case errors.Is(err, statestore.ErrTooLarge):
		return protocol.Domain(protocol.ErrStateTooLarge, what+": "+err.Error(), false)
	case errors.Is(err, statestore.ErrInvalid):
		// A provider-state directory that became a link (Source.Strict).
		return protocol.Domain(protocol.ErrStateConflict, what+": "+err.Error(), false)
	}
	return protocol.Domain(protocol.ErrStateStoreUnavailable, what+": "+err.Error(), true)
}

// acquireState is the admission worker's step for an open with a store:
// take the key over in the store, then restore its archive when the local
// copy is missing or older (marker), before the record is read and
// anything launched. It returns the lease and what was restored (nil if
// nothing).
func (s *session) acquireState(ctx context.Context, in *admissionInput) (*statestore.Lease, *protocol.Restore, *protocol.Error) {
	ss := s.m.stateStore()
	// Before the takeover: a sidecar whose master key cannot open the
	// key's archives must not fence the key's owner (issue 29's trial).
	if err := ss.CheckKeys(ctx, s.key); err != nil {
		return nil, nil, stateError("the key's published state cannot be opened with this sidecar's master key", err)
	}
	lease, err := ss.Acquire(ctx, s.key)
	if err != nil {
		return nil, nil, stateError("the key could not be taken over in the state store", err)
	}
	h := lease.Head()
	if h.Archive == nil || localGeneration(in.st, s.key) == h.Archive.Generation {
		return lease, nil, nil
	}
	r, err := ss.Restore(ctx, lease, s.restoreTargets(in.st, in.stateSources), in.st.Dir())
	if err != nil {
		return nil, nil, stateError("the key's provider state could not be restored", err)
	}
	if r.Generation == 0 {
		return lease, nil, nil
	}
	if r.Generation != h.Archive.Generation {
		// The head's archive was corrupt and its previous one restored:
		// the last publication's changes are lost, and the operator must
		// hear it (adversarial trial: this was silent).
		s.log.Warn("the head's archive is corrupt; its previous archive was restored (the last publication is lost)",
			zap.String("sessionKey", s.key), zap.Int64("headGeneration", h.Archive.Generation), zap.Int64("restoredGeneration", r.Generation))
	}
	markLocal(in.st, s.key, r.Generation, s.log)
	if _, err := os.Lstat(journal.SegmentPath(in.st.SessionsDir(), journal.Stem(s.key), 0)); err == nil &&
		!slices.Contains(r.Kept, journalSource+".0") {
		s.reserveMovedJournal(in.st) // the journal came from the archive
	}
	// Absolute paths inside the restored state that named the old place
	// (pi-acp's session map; provrewrite.go).
	if changed, err := rewriteRestoredPaths(in.prof, in.stateSources); err != nil {
		s.log.Warn("restored paths not rewritten", zap.Error(err))
	} else if len(changed) > 0 {
		s.log.Info("restored paths rewritten", zap.Int("files", len(changed)))
	}
	kept := append([]string{}, r.Kept...)
	return lease, &protocol.Restore{Generation: r.Generation, Bytes: r.FileBytes, Entries: r.Entries, Ms: r.Ms, Kept: kept}, nil
}

// publishState publishes the session's provider state with its record
// and journal (docs/protocol.md §24), off the actor, serialized per
// session; nil without a store. A fenced lease is never used again. ctx
// bounds it (the sidecar's shutdown cancels it). treeGone says the tree
// was proven gone (a retire's or close's publication): a success then
// makes the store current. A publication whose store is current
// publishes nothing (skipped, no error): no tree ran since.
func (s *session) publishState(ctx context.Context, ps *providerState, st *store.Store, treeGone bool) *protocol.Publication {
	ss := s.m.stateStore()
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
	srcs := append(append([]statestore.Source{}, ps.sources...), s.ownSources(st)...)
	pub, err := ss.Publish(ctx, ps.lease, srcs)
	if err != nil {
		if errors.Is(err, statestore.ErrFenced) {
			ps.fenced = true
		}
		e := stateError("the provider state was not published", err)
		s.log.Warn("provider state not published", zap.String("code", string(e.Data.Code)))
		return &protocol.Publication{State: protocol.PublicationFailed, Ms: time.Since(start).Milliseconds(),
			Error: &protocol.ProofError{Code: e.Data.Code, Message: s.red.Clean(e.Message)}}
	}
	markLocal(st, s.key, pub.Generation, s.log)
	ps.current = treeGone
	out := &protocol.Publication{State: protocol.PublicationPublished, Generation: pub.Generation, Object: pub.Object,
		Bytes: pub.Bytes, Entries: pub.Entries, SHA256: pub.SHA256, Ms: pub.Ms}
	for _, sk := range pub.Skipped {
		out.Skipped = append(out.Skipped, sk.Path)
	}
	return out
}

// discardState deletes the key's objects from the store (a close with
// discardPersistentState), off the actor; the proof's publication says
// skipped, or failed with why.
func (s *session) discardState(ctx context.Context, ps *providerState, st *store.Store) *protocol.Publication {
	ss := s.m.stateStore()
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
				Error: &protocol.ProofError{Code: e.Data.Code, Message: s.red.Clean(e.Message)}}
		}
	}
	_ = os.Remove(localMarkerPath(st, s.key))
	return &protocol.Publication{State: protocol.PublicationSkipped, Ms: time.Since(start).Milliseconds()}
}

// storeStatus is session/status `store`: the head as this session last
// wrote it; nil without a store.
func (s *session) storeStatus() *protocol.StoreStatus {
	if s.rec.ps == nil || s.rec.ps.lease == nil {
		return nil
	}
	h := s.rec.ps.lease.Head()
	out := &protocol.StoreStatus{Generation: h.Generation, Owner: protocol.StoreOwner{SidecarID: h.Owner.SidecarID, Hostname: h.Owner.Hostname}}
	if h.PublishedAt != nil {
		t := protocol.At(*h.PublishedAt)
		out.PublishedAt = &t
	}
	return out
}

// localMarker is the key's note of the archive generation its local
// provider state matches (written after a publication or a restore):
// <stateDir>/sessions/.<stem>.state.
type localMarker struct {
	Generation int64 `json:"generation"`
}

func localMarkerPath(st *store.Store, key string) string {
	return filepath.Join(st.SessionsDir(), "."+store.EncodeKey(key)+".state")
}

// localGeneration is the generation the local copy matches, 0 if unknown.
func localGeneration(st *store.Store, key string) int64 {
	b, err := os.ReadFile(localMarkerPath(st, key))
	if err != nil {
		return 0
	}
	var m localMarker
	if json.Unmarshal(b, &m) != nil {
		return 0
	}
	return m.Generation
}

// markLocal notes that the local copy matches generation (best effort: a
// lost marker costs one restore that keeps every existing file).
func markLocal(st *store.Store, key string, generation int64, log *zap.Logger) {
	b, _ := json.Marshal(localMarker{Generation: generation})
	p := localMarkerPath(st, key)
	tmp := p + ".tmp-" + strings.TrimPrefix(newID(""), "")
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		if err = os.Rename(tmp, p); err != nil {
			_ = os.Remove(tmp)
			log.Warn("state marker not written", zap.Error(err))
		}
	}
}

// cleanupAttach records a publication in a proof (internal/cleanup owns
// the proof's shape).
func cleanupAttach(p *protocol.Proof, pub *protocol.Publication) { cleanup.AttachPublication(p, pub) }

// fenced reports whether proof's publication found the key taken over.
func fenced(proof *protocol.Proof) bool {
	p := proof.Publication
	return p != nil && p.Error != nil && p.Error.Code == protocol.ErrStateFenced
}

// endFenced ends a session whose key another sidecar took over in the
// store, once its tree is proven gone (proof): session/exited reason
// "fenced", the proof as cleanup/proof, the session closed; it never
// publishes again (docs/protocol.md §24). The record is marked closed
// here; the new owner's head is untouched.
func (s *session) endFenced(proof *protocol.Proof, during protocol.During) {
	s.log.Warn("another sidecar took the key over in the state store; the session ends")
	s.end.proof = proof
	s.moveTo(protocol.StateClosed)
	s.markClosed(false)
	s.m.releaseKey(s)
	s.notify(protocol.NotifySessionExited, protocol.ExitedNotice{Session: s.id, SessionKey: s.key, Pid: s.end.pid,
		During: during, Reason: protocol.ExitFenced})
	e := protocol.Domain(protocol.ErrStateFenced, "another sidecar took the session's key over in the state store; the session ended", false)
	s.answerWaiting(e)
	if s.life.retires > 0 || s.life.mode == protocol.LifecyclePerTurn {
		s.notifyEnded(e)
	}
	ca := s.end.closeReq
	s.end.closeReq = nil
	s.endWith(proof, ca, ca == nil) // a close's answer carries the proof
}

// publishTurn publishes after a turn of a warm session whose open asked
// for publish "turn" (docs/protocol.md §24), while its tree runs: what
// the agent is writing at that moment may be caught mid-write (a retire's
// or close's publication, after the tree is gone, is the consistent one).
func (s *session) publishTurn() {
	ps, st := s.rec.ps, s.rec.st
	s.flushOut()
	s.syncJournal()
	go func() {
		pub := s.publishState(s.m.stateCtx, ps, st, false)
		s.post(func() { s.turnPublished(pub) })
	}()
}

// turnPublished adopts a turn's publication: a fenced one ends the session
// (session/exited reason "fenced", its tree ended and proven gone, proof
// origin "fenced"); any other failure is logged, and the next publication
// tries again.
func (s *session) turnPublished(pub *protocol.Publication) {
	if pub == nil || pub.Error == nil {
		return
	}
	if pub.Error.Code != protocol.ErrStateFenced || !s.state.is(protocol.StateOpen, protocol.StateTurn) {
		s.log.Info("provider state of the turn not published; the next publication tries again", zap.String("code", string(pub.Error.Code)))
		return
	}
	during := protocol.DuringIdle
	if s.turns.turn != nil {
		during = protocol.DuringTurn
	}
	pid := s.end.pid
	if s.end.tree != nil {
		pid = s.end.tree.Info().Pid
	}
	s.notify(protocol.NotifySessionExited, protocol.ExitedNotice{Session: s.id, SessionKey: s.key, Pid: pid,
		During: during, Reason: protocol.ExitFenced})
	s.startCleanup("another sidecar took the key over in the state store", protocol.OriginFenced, false, nil)
}

// treeLaunched notes that a tree runs again (a revive): what the store
// holds may no longer be the state as it is.
func (ps *providerState) treeLaunched() {
	if ps == nil {
		return
	}
	ps.mu.Lock()
	ps.current = false
	ps.mu.Unlock()
}

// movedJournalGap is how many entry numbers a restored journal skips.
const movedJournalGap = 1 << 20

// reserveMovedJournal makes the key's journal, just restored from another
// sidecar's publication, skip movedJournalGap entry numbers with a
// journal/gap entry ("moved"): what the previous owner wrote after its
// last publication (its retire's proof, a fenced ending) is not here, and
// its numbers are never reused for this sidecar's entries, so a host
// paging session/events by afterN across the move sees the gap instead of
// two entries under one n (issue 29's trial).
func (s *session) reserveMovedJournal(st *store.Store) {
	j, err := journal.Open(st.SessionsDir(), s.key, s.m.cfg.Caps.JournalMaxBytes)
	if err != nil {
		s.log.Warn("restored journal not opened to mark the move", zap.Error(err))
		return
	}
	if err := j.Reserve(movedJournalGap, "moved: entries the previous owner wrote after its last publication are not here"); err != nil {
		s.log.Warn("restored journal: the move's gap entry not written", zap.Error(err))
	}
	_ = j.Close()
}

// verifyLease checks, before a revive launches anything, that the key's
// head is still this session's (statestore.Lease.Verify): STATE_FENCED
// when another sidecar took the key over; a store that cannot be read now
// is logged and the revive goes on (the next publication decides).
func (s *session) verifyLease(ctx context.Context, ps *providerState) *protocol.Error {
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
	s.log.Info("the key's head could not be checked before the revive; going on", zap.Error(err))
	return nil
}
