package session

import (
	"encoding/json"
	"strconv"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// A session's host notifications all leave through this file: each is
// appended to the session key's journal (internal/journal), queued, and
// sent by flushOut, which first hands the journal's buffer to the kernel
// in one write(2) — so an entry is in the kernel before its frame is in
// the host's pipe — then the queued frames to the host in one write when
// the host is a BatchHost: a burst of updates costs one journal write and
// one host write (docs/protocol.md §16, Session journal;
// docs/architecture.md, "Update path").

// publisher is a session's outgoing side: the key's journal it appends to,
// the frames queued for the host and the buffer they are encoded into, the
// session's update sequence and the write health of journal and record
// (persistence.go). Actor-owned.
type publisher struct {
	jn        *journal.Journal
	jnRelease func()
	jnFailed  bool // the journal could not be opened
	jnWarned  bool // a journal write failure was logged
	out       []outFrame
	outBuf    []byte
	seq       uint64 // the last session/update seq sent
	health    persistHealth
}

// BatchHost is a Host that writes several notifications at once: NotifyBatch
// writes ns in order as consecutive frames (one write(2) for a batch under
// 1 MiB), serialized with its other writes so that nothing comes between
// them and a response sent after it returned follows them; it blocks while
// the host is not reading (backpressure) and returns the first write error.
// rpc.Server implements it; a Host without it gets one Notify per frame.
type BatchHost interface {
	Host
	NotifyBatch(ns []jsonl.Notification) error
}

// outFrame is one queued notification. Its Params are a subslice of
// outBuf as it was when the frame was queued: bytes below len(outBuf) are
// never rewritten before flushOut, and an append that moves outBuf leaves
// the old array (and so the slice) as it was.
type outFrame = jsonl.Notification

// maxOutBatch bounds the frames queued before flushOut runs even though
// the inbox is not drained.
const maxOutBatch = 128

// ensureJournal opens the session key's journal on first use (the store's
// sessions directory exists once admission opened the store). The
// session's entries follow those of the key's earlier sessions: a key's
// journal keeps every session of the key (docs/protocol.md §16). A
// journal that cannot be opened is logged once and reported to the host
// (session/journal degraded); the notifications still go out.
func (s *Actor) ensureJournal() {
	if s.pub.jn != nil || s.pub.jnFailed || s.rec.st == nil {
		return
	}
	j, release, err := s.m.Journals.Acquire(s.rec.st.SessionsDir(), s.key)
	if err != nil {
		s.pub.jnFailed = true
		s.log.Warn("session journal unavailable", zap.Error(err))
		s.journalUnavailable(err)
		return
	}
	s.pub.jn, s.pub.jnRelease = j, release
}

// closeJournal syncs and releases the session's journal.
func (s *Actor) closeJournal() {
	s.flushOut()
	if s.pub.jn != nil {
		s.pub.jnRelease()
		s.pub.jn, s.pub.jnRelease = nil, nil
	}
}

// syncJournal makes the journal durable (fsync): at turn end and close.
func (s *Actor) syncJournal() {
	if s.pub.jn != nil {
		if err := s.pub.jn.Sync(); err != nil {
			s.log.Warn("session journal not synced", zap.Error(err))
		}
	}
}

// emit journals one notification — params are its params as they go on
// the wire — and queues its frame for flushOut.
func (s *Actor) emit(method string, params []byte) {
	start := len(s.pub.outBuf)
	s.pub.outBuf = append(s.pub.outBuf, params...)
	s.queueFrame(method, start)
}

// queueFrame journals outBuf[start:] as method's params and queues it.
func (s *Actor) queueFrame(method string, start int) {
	s.ensureJournal()
	if method != protocol.NotifySessionUpdate {
		// An agent's text quoting a secret (docs/protocol.md §13); an
		// update's was cleaned in emitUpdate, its envelope is ours.
		if clean, changed := s.red.CleanJSON(s.pub.outBuf[start:]); changed {
			s.pub.outBuf = append(s.pub.outBuf[:start], clean...)
		}
	}
	params := s.pub.outBuf[start:]
	if s.pub.jn != nil {
		if method == protocol.NotifySessionUpdate {
			s.pub.jn.AppendUpdateOf(s.id, s.pub.seq, params)
		} else {
			s.pub.jn.AppendNoticeOf(s.id, s.pub.seq, method, params)
		}
	}
	s.pub.out = append(s.pub.out, outFrame{Method: method, Params: params})
}

// flushOut writes the journal's buffer, then sends every queued frame in
// order.
func (s *Actor) flushOut() {
	if len(s.pub.out) == 0 {
		return
	}
	if s.pub.jn != nil {
		err := s.pub.jn.Flush()
		if err != nil && !s.pub.jnWarned {
			s.pub.jnWarned = true
			s.log.Warn("session journal write failed", zap.Error(err))
		}
		s.noteJournalWrite(err) // persistence.go: degraded/ok notices
	}
	var updates uint64
	for i := range s.pub.out {
		if s.pub.out[i].Method == protocol.NotifySessionUpdate {
			updates++
		}
	}
	if updates > 0 {
		s.m.Stats.updatesForwarded.Add(updates)
	}
	if bh, ok := s.m.Host.(BatchHost); ok {
		if err := bh.NotifyBatch(s.pub.out); err != nil {
			s.log.Debug("notifications not delivered", zap.Int("frames", len(s.pub.out)), zap.Error(err))
		}
	} else {
		for _, f := range s.pub.out {
			if err := s.m.Host.Notify(f.Method, json.RawMessage(f.Params)); err != nil {
				s.log.Debug("notification not delivered", zap.String("method", f.Method), zap.Error(err))
			}
		}
	}
	clear(s.pub.out) // drop the references into outBuf's old arrays
	s.pub.out, s.pub.outBuf = s.pub.out[:0], s.pub.outBuf[:0]
	if cap(s.pub.outBuf) > 1<<20 {
		s.pub.outBuf = nil // a burst of large updates: do not keep its buffer
	}
}

// notify journals and sends one notification other than session/update,
// after every frame queued before it.
func (s *Actor) notify(method string, params any) {
	raw, err := json.Marshal(params)
	if err != nil {
		s.log.Error("notification not encodable (a bug)", zap.String("method", method), zap.Error(err))
		return
	}
	s.emit(method, raw)
	s.flushOut()
}

// journalRequest journals a sidecar → host request as it is sent
// (session/requestPermission), after the frames queued before it; the
// caller then sends it.
func (s *Actor) journalRequest(method string, params any) {
	s.flushOut()
	s.ensureJournal()
	if s.pub.jn == nil {
		return
	}
	if raw, err := json.Marshal(params); err == nil {
		raw, _ = s.red.CleanJSON(raw)
		s.pub.jn.AppendNoticeOf(s.id, s.pub.seq, method, raw)
		_ = s.pub.jn.Flush()
	}
}

// emitUpdate queues one session/update, its params rendered as
// protocol.SessionUpdateNotice marshals them straight into the frame
// buffer, without re-encoding the agent's update: rid is the requestId
// already JSON-encoded (a string or null).
func (s *Actor) emitUpdate(rid []byte, seq uint64, update json.RawMessage) {
	update, _ = s.red.CleanJSON(update) // the agent's part only (docs/protocol.md §13)
	start := len(s.pub.outBuf)
	b := append(s.pub.outBuf, `{"session":"`...)
	b = append(b, s.id...) // "s-" + hex: nothing to escape
	b = append(b, `","requestId":`...)
	b = append(b, rid...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"update":`...)
	b = append(b, update...)
	s.pub.outBuf = append(b, '}')
	s.queueFrame(protocol.NotifySessionUpdate, start)
}

// jsonString encodes a requestId as a JSON string.
func jsonString(v string) []byte {
	b, _ := json.Marshal(v)
	return b
}
