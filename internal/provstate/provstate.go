// Package provstate is a session's portable provider state
// (docs/protocol.md §24, after PROTOCOL §10.2): with --state-store, an
// open takes ownership of its key in the store (statestore.Store.Acquire)
// and restores the key's published archive before the launch when the
// local copy is missing or older; a retire and a close publish the
// agent's provider-state directories with the key's record and journal,
// once the tree is proven gone. The bytes, the crypto and the fencing are
// internal/statestore's; this package decides when, and what the host is
// told.
//
// Its steps are functions of their inputs: what they read off a session
// and its Manager (the stores, the key, the profile, the logger, the
// redaction of host-bound text) is passed in by value (Session, Dirs),
// and the session actor in internal/session calls them and owns their
// results. It never holds a session. It may import protocol, profiles,
// statestore, store, journal, fspath (path predicates) and zap — never
// internal/adapter, internal/session, rpc or reaper.
package provstate

import (
	"errors"
	"sync"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// State is a session's provider state: its lease on the key in the
// store and the agent's provider-state directories. Both are set by New
// (the admission worker, before the actor adopts the admission) and never
// change after; an internal mutex serializes the workers that publish (a
// retire's, a close's, a turn's), which are the only users of the lease
// besides Status (statestore.Lease is safe for concurrent use). A nil
// *State is a session without a store: every step is then a no-op.
type State struct {
	mu      sync.Mutex
	lease   *statestore.Lease
	sources []statestore.Source // the agent's provider-state dirs (not the record and journal)
	fenced  bool                // under mu: another sidecar took the key over
	// current (under mu): the store holds the provider state as it is
	// now — published after the tree was proven gone, and no tree ran
	// since — so a parked session's close has nothing new to publish.
	current bool
}

// New is the provider state of a session whose open took the key over
// with lease (Session.Acquire); sources are its provider-state
// directories (Sources), not the record and journal.
func New(lease *statestore.Lease, sources []statestore.Source) *State {
	return &State{lease: lease, sources: sources}
}

// TreeLaunched notes that a tree runs again (a revive): what the store
// holds may no longer be the state as it is. Safe on a nil *State.
func (ps *State) TreeLaunched() {
	if ps == nil {
		return
	}
	ps.mu.Lock()
	ps.current = false
	ps.mu.Unlock()
}

// Session is what the provider-state steps read off a session and its
// Manager, gathered by the session (on its actor, or from its immutable
// fields) and passed by value.
type Session struct {
	// States is the configured state store (--state-store); nil: none,
	// and Publish, Discard and RestoreForRevive do nothing.
	States *statestore.Store
	// Key is the session key.
	Key string
	// Log is the session's logger.
	Log *zap.Logger
	// Clean redacts text bound for the host (a publication's error
	// message); nil: none.
	Clean func(string) string
	// JournalMaxBytes is the size at which the key's journal rotates
	// (internal/journal.Open's maxBytes), used to mark a moved journal.
	JournalMaxBytes int64
}

func (k Session) clean(text string) string {
	if k.Clean == nil {
		return text
	}
	return k.Clean(text)
}

// ownSourceNames are the archive names of the key's record and journal
// segments.
const (
	recordSource  = "acpx-record"
	journalSource = "acpx-journal"
)

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

// Fenced reports whether proof's publication found the key taken over by
// another sidecar (its error's code is STATE_FENCED; docs/protocol.md
// §24).
func Fenced(proof *protocol.Proof) bool {
	p := proof.Publication
	return p != nil && p.Error != nil && p.Error.Code == protocol.ErrStateFenced
}

// Status is session/status `store` (docs/protocol.md §24): the head as
// this session last wrote it; nil without a store.
func Status(ps *State) *protocol.StoreStatus {
	if ps == nil || ps.lease == nil {
		return nil
	}
	h := ps.lease.Head()
	out := &protocol.StoreStatus{Generation: h.Generation, Owner: protocol.StoreOwner{SidecarID: h.Owner.SidecarID, Hostname: h.Owner.Hostname}}
	if h.PublishedAt != nil {
		t := protocol.At(*h.PublishedAt)
		out.PublishedAt = &t
	}
	return out
}
