package session

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/outbox"
)

// A session's host notifications all leave through its publisher, s.pub
// (internal/outbox): each is appended to the session key's journal,
// queued, and sent by Publisher.Flush, which first hands the journal's buffer to
// the kernel in one write(2), then the queued frames to the host in one
// write when the host is an outbox.BatchHost (docs/protocol.md §16, Session
// journal; docs/architecture.md, "Update path"). The publisher also keeps
// the session's update seq and its files' write health (session/journal).

// newPublisher makes the session's publisher; run by New, before
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
