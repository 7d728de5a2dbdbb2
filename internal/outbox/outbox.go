package outbox

import (
	"encoding/json"
	"strconv"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/redact"
	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Host is where a Publisher's frames go: Notify sends one notification
// whose params are the JSON bytes given, written verbatim into the frame;
// it blocks while the host is not reading and returns the write error.
// internal/session's Host (rpc.Server) is one.
type Host interface {
	Notify(method string, params json.RawMessage) error
}

// BatchHost is a Host that writes several notifications at once:
// NotifyBatch writes ns in order as consecutive frames (one write(2) for a
// batch under 1 MiB), serialized with its other writes so that nothing
// comes between them and a response sent after it returned follows them;
// it blocks while the host is not reading (backpressure) and returns the
// first write error. rpc.Server implements it; a Host without it gets one
// Notify per frame.
type BatchHost interface {
	Host
	NotifyBatch(ns []jsonl.Notification) error
}

// MaxBatch is how many frames may be queued before the actor flushes even
// though its inbox is not drained (FlushDue).
const MaxBatch = 128

// Config is what a Publisher reads off its session and the session's
// Manager, given once by the actor that owns it.
type Config struct {
	// Session is the session id ("s-" + hex): written into frames as is,
	// never escaped.
	Session string
	// Key is the session key, whose journal the session appends to.
	Key string
	// Journals is the Manager's registry of open journals; the key's is
	// acquired on first use and released by CloseJournal. Nil: no journal.
	Journals *registry.Journals
	// SessionsDir returns the sessions directory of the session's store,
	// or "" while the store is not open yet (the journal is then not
	// opened, and the notifications go out unjournaled). Nil: always "".
	SessionsDir func() string
	// Host gets the frames; required before the first Flush.
	Host Host
	// Redactor cleans the agent's text of the session's secrets
	// (docs/protocol.md §13); nil cleans nothing.
	Redactor *redact.Redactor
	// Log is the session's logger; nil: zap.NewNop.
	Log *zap.Logger
	// Forwarded counts the session/update frames handed to the host
	// (sidecar/stats updatesForwarded, docs/protocol.md §17); nil: not
	// counted.
	Forwarded *atomic.Uint64
}

// Publisher is a session's outgoing side: the key's journal it appends
// to, the frames queued for the host and the buffer they are encoded
// into, the session's update sequence and the write health of journal,
// record and ledger entry (health.go). It is owned by one session actor:
// every method must be called on that actor's goroutine only.
type Publisher struct {
	cfg       Config
	jn        *journal.Journal
	jnRelease func()
	jnFailed  bool // the journal could not be opened, or must not be again
	jnWarned  bool // a journal write failure was logged
	out       []outFrame
	outBuf    []byte
	seq       uint64 // the last session/update seq sent
	health    persistHealth
}

// outFrame is one queued notification. Its Params are a subslice of
// outBuf as it was when the frame was queued: bytes below len(outBuf) are
// never rewritten before Flush, and an append that moves outBuf leaves
// the old array (and so the slice) as it was.
type outFrame = jsonl.Notification

// New returns the Publisher of one session, with nothing queued, seq 0
// and every file healthy.
func New(cfg Config) *Publisher {
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return &Publisher{cfg: cfg}
}

// Seq is the seq of the last session/update queued (0: none yet).
func (p *Publisher) Seq() uint64 { return p.seq }

// NextSeq advances the update sequence and returns the new seq, the one
// the next EmitUpdate is given.
func (p *Publisher) NextSeq() uint64 {
	p.seq++
	return p.seq
}

// Queued is how many frames wait for Flush.
func (p *Publisher) Queued() int { return len(p.out) }

// FlushDue reports whether the actor should Flush after a message:
// frames are queued and either its inbox is drained (inboxEmpty: a burst
// of updates shares one journal write) or MaxBatch frames are queued.
func (p *Publisher) FlushDue(inboxEmpty bool) bool {
	return len(p.out) > 0 && (inboxEmpty || len(p.out) >= MaxBatch)
}

// ensureJournal opens the session key's journal on first use (the store's
// sessions directory exists once admission opened the store). The
// session's entries follow those of the key's earlier sessions: a key's
// journal keeps every session of the key (docs/protocol.md §16). A
// journal that cannot be opened is logged once and reported to the host
// (session/journal degraded); the notifications still go out.
func (p *Publisher) ensureJournal() {
	if p.jn != nil || p.jnFailed || p.cfg.Journals == nil || p.cfg.SessionsDir == nil {
		return
	}
	dir := p.cfg.SessionsDir()
	if dir == "" {
		return
	}
	j, release, err := p.cfg.Journals.Acquire(dir, p.cfg.Key)
	if err != nil {
		p.jnFailed = true
		p.cfg.Log.Warn("session journal unavailable", zap.Error(err))
		p.journalUnavailable(err)
		return
	}
	p.jn, p.jnRelease = j, release
}

// CloseJournal flushes what is queued and releases the session's journal
// (a later notification opens it again; ForgoJournal prevents that).
func (p *Publisher) CloseJournal() {
	p.Flush()
	if p.jn != nil {
		p.jnRelease()
		p.jn, p.jnRelease = nil, nil
	}
}

// ForgoJournal keeps the journal from being opened again by a later
// notification (the key's journal was removed with its record).
func (p *Publisher) ForgoJournal() { p.jnFailed = true }

// SyncJournal makes the journal durable (fsync): at turn end and close.
// A failure is logged, never returned.
func (p *Publisher) SyncJournal() {
	if p.jn != nil {
		if err := p.jn.Sync(); err != nil {
			p.cfg.Log.Warn("session journal not synced", zap.Error(err))
		}
	}
}

// Emit journals one notification — params are its params as they go on
// the wire, cleaned of secrets here — and queues its frame for Flush.
func (p *Publisher) Emit(method string, params []byte) {
	start := len(p.outBuf)
	p.outBuf = append(p.outBuf, params...)
	p.queueFrame(method, start)
}

// queueFrame journals outBuf[start:] as method's params and queues it.
func (p *Publisher) queueFrame(method string, start int) {
	p.ensureJournal()
	if method != protocol.NotifySessionUpdate {
		// An agent's text quoting a secret (docs/protocol.md §13); an
		// update's was cleaned in EmitUpdate, its envelope is ours.
		if clean, changed := p.cfg.Redactor.CleanJSON(p.outBuf[start:]); changed {
			p.outBuf = append(p.outBuf[:start], clean...)
		}
	}
	params := p.outBuf[start:]
	if p.jn != nil {
		if method == protocol.NotifySessionUpdate {
			p.jn.AppendUpdateOf(p.cfg.Session, p.seq, params)
		} else {
			p.jn.AppendNoticeOf(p.cfg.Session, p.seq, method, params)
		}
	}
	p.out = append(p.out, outFrame{Method: method, Params: params})
}

// Flush writes the journal's buffer, then sends every queued frame in
// order: in one NotifyBatch to a BatchHost, else one Notify each. Write
// errors are logged (a journal's once, and told to the host: health.go),
// never returned.
func (p *Publisher) Flush() {
	if len(p.out) == 0 {
		return
	}
	if p.jn != nil {
		err := p.jn.Flush()
		if err != nil && !p.jnWarned {
			p.jnWarned = true
			p.cfg.Log.Warn("session journal write failed", zap.Error(err))
		}
		p.noteJournalWrite(err) // health.go: degraded/ok notices
	}
	var updates uint64
	for i := range p.out {
		if p.out[i].Method == protocol.NotifySessionUpdate {
			updates++
		}
	}
	if updates > 0 && p.cfg.Forwarded != nil {
		p.cfg.Forwarded.Add(updates)
	}
	if bh, ok := p.cfg.Host.(BatchHost); ok {
		if err := bh.NotifyBatch(p.out); err != nil {
			p.cfg.Log.Debug("notifications not delivered", zap.Int("frames", len(p.out)), zap.Error(err))
		}
	} else {
		for _, f := range p.out {
			if err := p.cfg.Host.Notify(f.Method, json.RawMessage(f.Params)); err != nil {
				p.cfg.Log.Debug("notification not delivered", zap.String("method", f.Method), zap.Error(err))
			}
		}
	}
	clear(p.out) // drop the references into outBuf's old arrays
	p.out, p.outBuf = p.out[:0], p.outBuf[:0]
	if cap(p.outBuf) > 1<<20 {
		p.outBuf = nil // a burst of large updates: do not keep its buffer
	}
}

// Notify journals and sends one notification other than session/update
// (params: its params, JSON-encoded here), after every frame queued
// before it. A params value that cannot be encoded is a bug: logged, and
// nothing is sent.
func (p *Publisher) Notify(method string, params any) {
	raw, err := json.Marshal(params)
	if err != nil {
		p.cfg.Log.Error("notification not encodable (a bug)", zap.String("method", method), zap.Error(err))
		return
	}
	p.Emit(method, raw)
	p.Flush()
}

// JournalRequest journals a sidecar → host request as it is sent
// (session/requestPermission, session/elicitation, session/extRequest;
// docs/protocol.md §16), cleaned of secrets, after the frames queued
// before it; the caller then sends it.
func (p *Publisher) JournalRequest(method string, params any) {
	p.Flush()
	p.ensureJournal()
	if p.jn == nil {
		return
	}
	if raw, err := json.Marshal(params); err == nil {
		raw, _ = p.cfg.Redactor.CleanJSON(raw)
		p.jn.AppendNoticeOf(p.cfg.Session, p.seq, method, raw)
		_ = p.jn.Flush()
	}
}

// EmitUpdate queues one session/update, its params rendered as
// protocol.SessionUpdateNotice marshals them straight into the frame
// buffer, without re-encoding the agent's update (cleaned of secrets
// here): rid is the requestId already JSON-encoded (a string or null),
// seq the update's (NextSeq).
func (p *Publisher) EmitUpdate(rid []byte, seq uint64, update json.RawMessage) {
	update, _ = p.cfg.Redactor.CleanJSON(update) // the agent's part only (docs/protocol.md §13)
	start := len(p.outBuf)
	b := append(p.outBuf, `{"session":"`...)
	b = append(b, p.cfg.Session...) // "s-" + hex: nothing to escape
	b = append(b, `","requestId":`...)
	b = append(b, rid...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"update":`...)
	b = append(b, update...)
	p.outBuf = append(b, '}')
	p.queueFrame(protocol.NotifySessionUpdate, start)
}

// JournalHistory journals one update the agent replayed while the session
// was loaded as a session/history entry {session, update} (never sent
// live; docs/protocol.md §16), so a host can rebuild the conversation
// after a reopen.
func (p *Publisher) JournalHistory(update json.RawMessage) {
	p.ensureJournal()
	if p.jn == nil {
		return
	}
	b := make([]byte, 0, len(update)+48)
	b = append(b, `{"session":"`...)
	b = append(b, p.cfg.Session...)
	b = append(b, `","update":`...)
	b = append(b, update...)
	b = append(b, '}')
	p.jn.AppendNoticeOf(p.cfg.Session, p.seq, protocol.JournalEntryHistory, b)
}

// FlushHistory writes the session/history entries a load journaled (they
// have no frame to go before) once the load is over, then Flushes.
func (p *Publisher) FlushHistory() {
	if p.jn == nil {
		return
	}
	p.noteJournalWrite(p.jn.Flush())
	p.Flush()
}
