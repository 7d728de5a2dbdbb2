package registry

import (
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
)

// Journals is the session journals this sidecar has open (docs/protocol.md
// §16, Session journal), one per key and sessions directory, each shared
// by reference count by whoever writes or reads it now: the session of its
// key, a retained cleanup's late proof, a recovered proof, a
// session/events read. Make one with NewJournals; safe for concurrent use.
type Journals struct {
	t        refTable[journalRef]
	maxBytes int64
	log      *zap.Logger
}

// journalRef is one open journal and how many users share it.
type journalRef struct {
	j    *journal.Journal
	refs int
}

// NewJournals returns an empty Journals whose journals are opened with
// maxBytes (journal.Open's live-segment size in bytes; the Manager's
// Caps.JournalMaxBytes) and log, which gets a warning when a journal
// does not close cleanly (nil: zap.NewNop).
func NewJournals(maxBytes int64, log *zap.Logger) *Journals {
	if log == nil {
		log = zap.NewNop()
	}
	return &Journals{maxBytes: maxBytes, log: log}
}

// Acquire opens (or shares) the journal of key in sessionsDir; the
// returned release is idempotent and closes the journal when its last
// user is done. Errors: journal.Open's, nothing held.
func (r *Journals) Acquire(sessionsDir, key string) (*journal.Journal, func(), error) {
	id := sessionsDir + "\x00" + key
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	ref := r.t.refs[id]
	if ref == nil {
		j, err := journal.Open(sessionsDir, key, r.maxBytes)
		if err != nil {
			return nil, nil, err
		}
		ref = &journalRef{j: j}
		r.t.put(id, ref)
	}
	ref.refs++
	released := false
	return ref.j, func() {
		r.t.mu.Lock()
		defer r.t.mu.Unlock()
		if released {
			return
		}
		released = true
		if ref.refs--; ref.refs == 0 {
			delete(r.t.refs, id)
			if err := ref.j.Close(); err != nil {
				r.log.Warn("session journal not closed cleanly", zap.Error(err))
			}
		}
	}, nil
}

// Live returns the journal of key in sessionsDir if this sidecar has it
// open, with a reference the caller releases (as Acquire's); nil, nil if
// none is open (or it could not be shared).
func (r *Journals) Live(sessionsDir, key string) (*journal.Journal, func()) {
	r.t.mu.Lock()
	ref := r.t.refs[sessionsDir+"\x00"+key]
	r.t.mu.Unlock()
	if ref == nil {
		return nil, nil
	}
	j, release, err := r.Acquire(sessionsDir, key)
	if err != nil {
		return nil, nil
	}
	return j, release
}
