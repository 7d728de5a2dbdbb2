package adapter

import (
	"encoding/json"
	"path/filepath"
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
func (s *session) ensureJournal() {
	if s.jn != nil || s.jnFailed || s.st == nil {
		return
	}
	j, release, err := s.m.acquireJournal(s.st.SessionsDir(), s.key)
	if err != nil {
		s.jnFailed = true
		s.log.Warn("session journal unavailable", zap.Error(err))
		s.journalUnavailable(err)
		return
	}
	s.jn, s.jnRelease = j, release
}

// closeJournal syncs and releases the session's journal.
func (s *session) closeJournal() {
	s.flushOut()
	if s.jn != nil {
		s.jnRelease()
		s.jn, s.jnRelease = nil, nil
	}
}

// syncJournal makes the journal durable (fsync): at turn end and close.
func (s *session) syncJournal() {
	if s.jn != nil {
		if err := s.jn.Sync(); err != nil {
			s.log.Warn("session journal not synced", zap.Error(err))
		}
	}
}

// emit journals one notification — params are its params as they go on
// the wire — and queues its frame for flushOut.
func (s *session) emit(method string, params []byte) {
	start := len(s.outBuf)
	s.outBuf = append(s.outBuf, params...)
	s.queueFrame(method, start)
}

// queueFrame journals outBuf[start:] as method's params and queues it.
func (s *session) queueFrame(method string, start int) {
	s.ensureJournal()
	params := s.outBuf[start:]
	if s.jn != nil {
		if method == protocol.NotifySessionUpdate {
			s.jn.AppendUpdateOf(s.id, s.seq, params)
		} else {
			s.jn.AppendNoticeOf(s.id, s.seq, method, params)
		}
	}
	s.out = append(s.out, outFrame{Method: method, Params: params})
}

// flushOut writes the journal's buffer, then sends every queued frame in
// order.
func (s *session) flushOut() {
	if len(s.out) == 0 {
		return
	}
	if s.jn != nil {
		err := s.jn.Flush()
		if err != nil && !s.jnWarned {
			s.jnWarned = true
			s.log.Warn("session journal write failed", zap.Error(err))
		}
		s.noteJournalWrite(err) // persistence.go: degraded/ok notices
	}
	var updates uint64
	for i := range s.out {
		if s.out[i].Method == protocol.NotifySessionUpdate {
			updates++
		}
	}
	if updates > 0 {
		s.m.stats.updatesForwarded.Add(updates)
	}
	if bh, ok := s.m.host.(BatchHost); ok {
		if err := bh.NotifyBatch(s.out); err != nil {
			s.log.Debug("notifications not delivered", zap.Int("frames", len(s.out)), zap.Error(err))
		}
	} else {
		for _, f := range s.out {
			if err := s.m.host.Notify(f.Method, json.RawMessage(f.Params)); err != nil {
				s.log.Debug("notification not delivered", zap.String("method", f.Method), zap.Error(err))
			}
		}
	}
	clear(s.out) // drop the references into outBuf's old arrays
	s.out, s.outBuf = s.out[:0], s.outBuf[:0]
	if cap(s.outBuf) > 1<<20 {
		s.outBuf = nil // a burst of large updates: do not keep its buffer
	}
}

// notify journals and sends one notification other than session/update,
// after every frame queued before it.
func (s *session) notify(method string, params any) {
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
func (s *session) journalRequest(method string, params any) {
	s.flushOut()
	s.ensureJournal()
	if s.jn == nil {
		return
	}
	if raw, err := json.Marshal(params); err == nil {
		s.jn.AppendNoticeOf(s.id, s.seq, method, raw)
		_ = s.jn.Flush()
	}
}

// emitUpdate queues one session/update, its params rendered as
// protocol.SessionUpdateNotice marshals them straight into the frame
// buffer, without re-encoding the agent's update: rid is the requestId
// already JSON-encoded (a string or null).
func (s *session) emitUpdate(rid []byte, seq uint64, update json.RawMessage) {
	start := len(s.outBuf)
	b := append(s.outBuf, `{"session":"`...)
	b = append(b, s.id...) // "s-" + hex: nothing to escape
	b = append(b, `","requestId":`...)
	b = append(b, rid...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"update":`...)
	b = append(b, update...)
	s.outBuf = append(b, '}')
	s.queueFrame(protocol.NotifySessionUpdate, start)
}

// jsonString encodes a requestId as a JSON string.
func jsonString(v string) []byte {
	b, _ := json.Marshal(v)
	return b
}

// journalRef is one open journal shared by whoever writes or reads it
// now: the session of its key, a retained cleanup's late proof, a
// recovered proof, a session/events read.
type journalRef struct {
	j    *journal.Journal
	refs int
}

// acquireJournal opens (or shares) the journal of key in sessionsDir; the
// returned release closes it when its last user is done.
func (m *Manager) acquireJournal(sessionsDir, key string) (*journal.Journal, func(), error) {
	id := sessionsDir + "\x00" + key
	m.journals.mu.Lock()
	defer m.journals.mu.Unlock()
	ref := m.journals.refs[id]
	if ref == nil {
		j, err := journal.Open(sessionsDir, key, m.cfg.Caps.JournalMaxBytes)
		if err != nil {
			return nil, nil, err
		}
		ref = &journalRef{j: j}
		m.journals.put(id, ref)
	}
	ref.refs++
	released := false
	return ref.j, func() {
		m.journals.mu.Lock()
		defer m.journals.mu.Unlock()
		if released {
			return
		}
		released = true
		if ref.refs--; ref.refs == 0 {
			delete(m.journals.refs, id)
			if err := ref.j.Close(); err != nil {
				m.log.Warn("session journal not closed cleanly", zap.Error(err))
			}
		}
	}, nil
}

// liveJournal returns the journal of key in sessionsDir if this sidecar
// has it open, with a reference the caller releases.
func (m *Manager) liveJournal(sessionsDir, key string) (*journal.Journal, func()) {
	m.journals.mu.Lock()
	ref := m.journals.refs[sessionsDir+"\x00"+key]
	m.journals.mu.Unlock()
	if ref == nil {
		return nil, nil
	}
	j, release, err := m.acquireJournal(sessionsDir, key)
	if err != nil {
		return nil, nil
	}
	return j, release
}

// notifyJournaled journals and sends a notification from outside a
// session actor (a retained cleanup's final proof, a recovered proof):
// into the journal of key in stateDir as an entry of session, synced,
// then to the host.
func (m *Manager) notifyJournaled(stateDir, key, session, method string, params any) {
	raw, err := json.Marshal(params)
	if err != nil {
		m.log.Error("notification not encodable (a bug)", zap.String("method", method), zap.Error(err))
		return
	}
	if stateDir != "" && key != "" {
		if j, release, err := m.acquireJournal(filepath.Join(stateDir, "sessions"), key); err == nil {
			j.AppendSessionNotice(session, method, raw)
			_ = j.Sync()
			release()
		} else {
			m.log.Debug("session journal unavailable", zap.Error(err))
		}
	}
	if err := m.host.Notify(method, json.RawMessage(raw)); err != nil {
		m.log.Debug("notification not delivered", zap.String("method", method), zap.Error(err))
	}
}
