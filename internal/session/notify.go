package session

import (
	"encoding/json"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/outbox"
)

// A session's host notifications all leave through its publisher, s.pub
// (internal/outbox): each is appended to the session key's journal,
// queued, and sent by flushOut, which first hands the journal's buffer to
// the kernel in one write(2), then the queued frames to the host in one
// write when the host is a BatchHost (docs/protocol.md §16, Session
// journal; docs/architecture.md, "Update path"). The publisher also keeps
// the session's update seq and its files' write health (session/journal).

// BatchHost is a Host that writes several notifications at once: NotifyBatch
// writes ns in order as consecutive frames (one write(2) for a batch under
// 1 MiB), serialized with its other writes so that nothing comes between
// them and a response sent after it returned follows them; it blocks while
// the host is not reading (backpressure) and returns the first write error.
// rpc.Server implements it; a Host without it gets one Notify per frame
// (the publisher checks for outbox.BatchHost, the same NotifyBatch).
type BatchHost interface {
	Host
	NotifyBatch(ns []jsonl.Notification) error
}

var _ outbox.BatchHost = BatchHost(nil)

// newPublisher makes the session's publisher; run on newSession, before
// the actor starts. The store is read when the journal is first needed.
func (s *Actor) newPublisher() *outbox.Publisher {
	return outbox.New(outbox.Config{Session: s.id, Key: s.key, Journals: s.m.Journals, Host: s.m.Host,
		Redactor: s.red, Log: s.log, Forwarded: s.m.Stats.Forwarded(),
		SessionsDir: func() string {
			if s.rec.st == nil {
				return ""
			}
			return s.rec.st.SessionsDir()
		}})
}

// flushOut writes the journal's buffer, then sends every queued frame in
// order (outbox.Publisher.Flush).
func (s *Actor) flushOut() { s.pub.Flush() }

// notify journals and sends one notification other than session/update,
// after every frame queued before it (outbox.Publisher.Notify).
func (s *Actor) notify(method string, params any) { s.pub.Notify(method, params) }

// jsonString encodes a requestId as a JSON string.
func jsonString(v string) []byte {
	b, _ := json.Marshal(v)
	return b
}
