package session

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
func (p persistHealth) status() *protocol.Persistence {
	st := func(degraded bool) string {
		if degraded {
			return protocol.PersistenceDegraded
		}
		return protocol.PersistenceOK
	}
	return &protocol.Persistence{Journal: st(p.journalDegraded), Record: st(p.recordDegraded)}
}

// noteJournalWrite takes the outcome of a journal Flush (err nil: written)
// during flushOut, before the queued frames go out: a first failure
// queues the degraded notice among them, the first success after
// failures the ok notice (with the gap the journal wrote), journaled and
// flushed before its frame.
func (s *Actor) noteJournalWrite(err error) {
	switch {
	case err != nil && !s.pub.health.journalDegraded:
		s.pub.health.journalDegraded = true
		h := s.pub.jn.Health()
		s.emitJournalNotice(protocol.JournalNotice{Session: s.id, State: protocol.PersistenceDegraded,
			File: protocol.PersistenceFileJournal, Error: journal.ErrReason(err), SinceSeq: h.SinceSeq})
	case err == nil && s.pub.health.journalDegraded:
		s.pub.health.journalDegraded = false
		s.pub.jnWarned = false
		h := s.pub.jn.Health()
		g := h.LastGap
		s.emitJournalNotice(protocol.JournalNotice{Session: s.id, State: protocol.PersistenceOK,
			File: protocol.PersistenceFileJournal, SinceSeq: s.pub.seq + 1,
			Gap: &protocol.JournalGap{FromN: g.FromN, ToN: g.ToN, Reason: g.Reason}})
		if ferr := s.pub.jn.Flush(); ferr != nil {
			s.noteJournalWrite(ferr)
		}
	}
}

// journalUnavailable reports a journal that could not be opened at all:
// degraded, with no later recovery for this session.
func (s *Actor) journalUnavailable(err error) {
	if s.pub.health.journalDegraded {
		return
	}
	s.pub.health.journalDegraded = true
	raw, merr := json.Marshal(protocol.JournalNotice{Session: s.id, State: protocol.PersistenceDegraded,
		File: protocol.PersistenceFileJournal, Error: journal.ErrReason(err), SinceSeq: s.pub.seq + 1})
	if merr == nil {
		// Its own bytes, not outBuf's: this runs inside queueFrame, whose
		// frame is outBuf from its start to the end (notify.go).
		s.pub.out = append(s.pub.out, outFrame{Method: protocol.NotifySessionJournal, Params: raw})
	}
}

// noteRecordWrite takes the outcome of a record write on the actor
// (persist): a first failure is told degraded (file "record"), the first
// success after failures ok.
func (s *Actor) noteRecordWrite(err error) {
	switch {
	case err != nil && !s.pub.health.recordDegraded:
		s.pub.health.recordDegraded = true
		s.notify(protocol.NotifySessionJournal, protocol.JournalNotice{Session: s.id, State: protocol.PersistenceDegraded,
			File: protocol.PersistenceFileRecord, Error: journal.ErrReason(err), SinceSeq: s.pub.seq})
	case err == nil && s.pub.health.recordDegraded:
		s.pub.health.recordDegraded = false
		s.notify(protocol.NotifySessionJournal, protocol.JournalNotice{Session: s.id, State: protocol.PersistenceOK,
			File: protocol.PersistenceFileRecord, SinceSeq: s.pub.seq})
	}
}

// emitJournalNotice queues a session/journal notice among the frames
// flushOut is about to send (journaled like any notification; while the
// journal is degraded its entry is counted in the gap).
func (s *Actor) emitJournalNotice(n protocol.JournalNotice) {
	raw, err := json.Marshal(n)
	if err != nil {
		s.log.Error("session/journal notice not encodable (a bug)", zap.Error(err))
		return
	}
	s.emit(protocol.NotifySessionJournal, raw)
}

// journalHistory journals one update the agent replayed while the session
// was loaded as a session/history entry {session, update} (never sent
// live), so a host can rebuild the conversation after a reopen.
func (s *Actor) journalHistory(update json.RawMessage) {
	s.ensureJournal()
	if s.pub.jn == nil {
		return
	}
	b := make([]byte, 0, len(update)+48)
	b = append(b, `{"session":"`...)
	b = append(b, s.id...)
	b = append(b, `","update":`...)
	b = append(b, update...)
	b = append(b, '}')
	s.pub.jn.AppendNoticeOf(s.id, s.pub.seq, protocol.JournalEntryHistory, b)
}

// flushHistory writes the session/history entries a load journaled (they
// have no frame to go before) once the load is over.
func (s *Actor) flushHistory() {
	if s.pub.jn == nil {
		return
	}
	s.noteJournalWrite(s.pub.jn.Flush())
	s.flushOut()
}

// reportLedger tells the host, once the open is answered, that the
// ownership-ledger entry could not be updated with the provider's
// identity (the entry written before the launch still lets a later
// sidecar find the tree by its marker).
func (s *Actor) reportLedger() {
	if s.pub.health.ledgerErr == nil || s.pub.health.ledgerDegraded {
		return
	}
	s.pub.health.ledgerDegraded = true
	s.notify(protocol.NotifySessionJournal, protocol.JournalNotice{Session: s.id, State: protocol.PersistenceDegraded,
		File: protocol.PersistenceFileLedger, Error: journal.ErrReason(s.pub.health.ledgerErr), SinceSeq: s.pub.seq})
}

// retryLedger rewrites a ledger entry whose update failed (at each record
// write) and tells the host ok when it works.
func (s *Actor) retryLedger() {
	if !s.pub.health.ledgerDegraded || s.end.tree == nil || s.rec.st == nil || !s.state.is(protocol.StateOpen, protocol.StateTurn) {
		return // a closing session's entry is removed, never rewritten
	}
	if err := s.writeLedger(s.rec.st, s.end.tree); err != nil {
		s.pub.health.ledgerErr = err
		return
	}
	s.pub.health.ledgerErr, s.pub.health.ledgerDegraded = nil, false
	s.notify(protocol.NotifySessionJournal, protocol.JournalNotice{Session: s.id, State: protocol.PersistenceOK,
		File: protocol.PersistenceFileLedger, SinceSeq: s.pub.seq})
}
