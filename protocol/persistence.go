package protocol

// The journal's and record's write health, and the journal's gaps
// (docs/protocol.md §16, "Journal: every session of a key, honest about
// gaps").

// NotifySessionJournal is the notification that a session's journal (or
// record) stopped being written (State PersistenceDegraded) or works
// again (PersistenceOK).
const NotifySessionJournal = "session/journal"

// JournalEntryHistory is the journal method (not a notification) of an update the agent
// replayed while the session was loaded: journaled, never sent live.
const JournalEntryHistory = "session/history"

// JournalEntryGap is the journal method of a gap entry: the first entry
// written once appends work again, naming the entries lost.
const JournalEntryGap = "journal/gap"

// PersistenceState is whether a session's files are being written
// (JournalNotice.State, Persistence's fields).
type PersistenceState string

// Persistence states.
const (
	// PersistenceOK: the file's writes work.
	PersistenceOK PersistenceState = "ok"
	// PersistenceDegraded: the file's writes fail; updates keep flowing
	// live.
	PersistenceDegraded PersistenceState = "degraded"
)

// JournalNotice.File values: which file's writes failed.
const (
	PersistenceFileJournal = "journal"
	PersistenceFileRecord  = "record"
	PersistenceFileLedger  = "ledger"
)

// JournalNotice is the params of `session/journal`. State is
// PersistenceDegraded (writes of File fail with Error; updates keep
// flowing live; SinceSeq is the seq from which entries may be missing)
// or PersistenceOK (writes work again; for the journal, Gap names the
// entries lost, written as a gap entry before those that follow).
type JournalNotice struct {
	// Session is the id of the session whose file this is about.
	Session string `json:"session"`
	// State is PersistenceDegraded (writes of File fail) or PersistenceOK
	// (they work again).
	State PersistenceState `json:"state"`
	// File names the file: PersistenceFileJournal, PersistenceFileRecord
	// or PersistenceFileLedger (the ownership-ledger entry).
	File string `json:"file"`
	// Error is the write error of a degraded file (e.g. "ENOSPC: no space
	// left on device"); omitted when State is ok.
	Error string `json:"error,omitempty"`
	// SinceSeq is, when degraded, the update seq from which the session's
	// entries may be missing.
	SinceSeq uint64 `json:"sinceSeq"`
	// Gap is the range of journal entries lost, on the journal's ok
	// notice only (the same range as the gap entry written before it).
	Gap *JournalGap `json:"gap,omitempty"`
}

// JournalGap is a range of journal entry numbers [FromN, ToN] that a
// reader will not find, and why ("ENOSPC: no space left on device",
// "rotated", "missing").
type JournalGap struct {
	// FromN is the first entry number lost.
	FromN uint64 `json:"fromN"`
	// ToN is the last entry number lost (inclusive).
	ToN uint64 `json:"toN"`
	// Reason is why: a degraded journal's write error, "rotated" (dropped
	// by rotation) or "missing" (absent without a gap entry, e.g. a write
	// torn by a crash).
	Reason string `json:"reason"`
}

// Persistence is session/status `persistence`: whether the session's
// journal and record are being written (PersistenceOK) or not
// (PersistenceDegraded).
type Persistence struct {
	// Journal is the journal's write state, as last told to the host.
	Journal PersistenceState `json:"journal"`
	// Record is the session record's write state, as last told to the
	// host.
	Record PersistenceState `json:"record"`
}
