package outbox

import (
	"encoding/json"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Persistence health (docs/protocol.md §16, "Journal: every session of a
// key, honest about gaps"): a journal append or a record write that fails
// does not stop the session. The host is told once —
// session/journal {state: "degraded", file, error, sinceSeq} — updates
// keep flowing live, every later write retries, and the first that works
// is told as state "ok" (for the journal, after the gap entry naming the
// entries lost: internal/journal). session/status reports both as
// persistence {journal, record}.

// persistHealth is the actor's view of its files' write health.
type persistHealth struct {
	journalDegraded bool
	recordDegraded  bool
	// ledgerErr: the ownership-ledger write after the launch failed (the
	// first, before it, is fail-closed); ledgerDegraded: told to the host.
	ledgerErr      error
	ledgerDegraded bool
}

// status is session/status `persistence`.
func (h persistHealth) status() *protocol.Persistence {
	st := func(degraded bool) protocol.PersistenceState {
		if degraded {
			return protocol.PersistenceDegraded
		}
		return protocol.PersistenceOK
	}
	return &protocol.Persistence{Journal: st(h.journalDegraded), Record: st(h.recordDegraded)}
}

// Persistence is session/status `persistence` (docs/protocol.md §16):
// journal and record each protocol.PersistenceOK or
// protocol.PersistenceDegraded, as last told to the host.
func (p *Publisher) Persistence() *protocol.Persistence { return p.health.status() }

// noteJournalWrite takes the outcome of a journal Flush (err nil: written)
// during Flush, before the queued frames go out: a first failure queues
// the degraded notice among them, the first success after failures the ok
// notice (with the gap the journal wrote), journaled and flushed before
// its frame.
func (p *Publisher) noteJournalWrite(err error) {
	switch {
	case err != nil && !p.health.journalDegraded:
		p.health.journalDegraded = true
		h := p.jn.Health()
		p.emitJournalNotice(protocol.JournalNotice{Session: p.cfg.Session, State: protocol.PersistenceDegraded,
			File: protocol.PersistenceFileJournal, Error: journal.ErrReason(err), SinceSeq: h.SinceSeq})
	case err == nil && p.health.journalDegraded:
		p.health.journalDegraded = false
		p.jnWarned = false
		h := p.jn.Health()
		g := h.LastGap
		p.emitJournalNotice(protocol.JournalNotice{Session: p.cfg.Session, State: protocol.PersistenceOK,
			File: protocol.PersistenceFileJournal, SinceSeq: p.seq + 1,
			Gap: &protocol.JournalGap{FromN: g.FromN, ToN: g.ToN, Reason: g.Reason}})
		if ferr := p.jn.Flush(); ferr != nil {
			p.noteJournalWrite(ferr)
		}
	}
}

// journalUnavailable reports a journal that could not be opened at all:
// degraded, with no later recovery for this session.
func (p *Publisher) journalUnavailable(err error) {
	if p.health.journalDegraded {
		return
	}
	p.health.journalDegraded = true
	raw, merr := json.Marshal(protocol.JournalNotice{Session: p.cfg.Session, State: protocol.PersistenceDegraded,
		File: protocol.PersistenceFileJournal, Error: journal.ErrReason(err), SinceSeq: p.seq + 1})
	if merr == nil {
		// Its own bytes, not outBuf's: this runs inside queueFrame, whose
		// frame is outBuf from its start to the end (outbox.go).
		p.out = append(p.out, outFrame{Method: protocol.NotifySessionJournal, Params: raw})
	}
}

// NoteRecordWrite takes the outcome of a record write on the actor (err
// nil: written): a first failure is told degraded (session/journal, file
// "record"), the first success after failures ok; anything else tells
// nothing.
func (p *Publisher) NoteRecordWrite(err error) {
	switch {
	case err != nil && !p.health.recordDegraded:
		p.health.recordDegraded = true
		p.Notify(protocol.NotifySessionJournal, protocol.JournalNotice{Session: p.cfg.Session, State: protocol.PersistenceDegraded,
			File: protocol.PersistenceFileRecord, Error: journal.ErrReason(err), SinceSeq: p.seq})
	case err == nil && p.health.recordDegraded:
		p.health.recordDegraded = false
		p.Notify(protocol.NotifySessionJournal, protocol.JournalNotice{Session: p.cfg.Session, State: protocol.PersistenceOK,
			File: protocol.PersistenceFileRecord, SinceSeq: p.seq})
	}
}

// emitJournalNotice queues a session/journal notice among the frames
// Flush is about to send (journaled like any notification; while the
// journal is degraded its entry is counted in the gap).
func (p *Publisher) emitJournalNotice(n protocol.JournalNotice) {
	raw, err := json.Marshal(n)
	if err != nil {
		p.cfg.Log.Error("session/journal notice not encodable (a bug)", zap.Error(err))
		return
	}
	p.Emit(protocol.NotifySessionJournal, raw)
}

// NoteLedgerFailure records that the ownership-ledger entry could not be
// updated with the provider's identity after the launch (err: the write's
// error); ReportLedger tells the host once the open is answered.
func (p *Publisher) NoteLedgerFailure(err error) { p.health.ledgerErr = err }

// ReportLedger tells the host, once the open is answered, that the
// ownership-ledger entry could not be updated with the provider's
// identity (session/journal degraded, file "ledger"; the entry written
// before the launch still lets a later sidecar find the tree by its
// marker). It tells nothing when the update worked or was told already.
func (p *Publisher) ReportLedger() {
	if p.health.ledgerErr == nil || p.health.ledgerDegraded {
		return
	}
	p.health.ledgerDegraded = true
	p.Notify(protocol.NotifySessionJournal, protocol.JournalNotice{Session: p.cfg.Session, State: protocol.PersistenceDegraded,
		File: protocol.PersistenceFileLedger, Error: journal.ErrReason(p.health.ledgerErr), SinceSeq: p.seq})
}

// RetryLedger rewrites a ledger entry whose update was told degraded (at
// each record write) and tells the host ok when it works. live says the
// entry may be rewritten: the session runs a tree, has a store and is
// open or in a turn (a closing session's entry is removed, never
// rewritten); write rewrites it and returns its error, kept for the next
// retry.
func (p *Publisher) RetryLedger(live bool, write func() error) {
	if !p.health.ledgerDegraded || !live {
		return
	}
	if err := write(); err != nil {
		p.health.ledgerErr = err
		return
	}
	p.health.ledgerErr, p.health.ledgerDegraded = nil, false
	p.Notify(protocol.NotifySessionJournal, protocol.JournalNotice{Session: p.cfg.Session, State: protocol.PersistenceOK,
		File: protocol.PersistenceFileLedger, SinceSeq: p.seq})
}
