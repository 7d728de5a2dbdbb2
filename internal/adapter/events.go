package adapter

import (
	"path/filepath"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Events answers session/events (docs/protocol.md §16): the journal
// entries of p.SessionKey in p.StateDir (default --state-dir) after entry
// number p.AfterN — every session of the key — or, with p.AfterSeq or
// p.Session, those of p.Session (default the latest) after p.AfterSeq; at
// most p.Limit, with the gaps of the range and whether it is complete.
// It serves a live session's journal (what
// it buffered included), a closed one's, or one a dead sidecar left on
// disk. The read runs off the host's read loop. Errors: -32602 for a key
// too long for a file name or no stateDir; STORE_UNAVAILABLE when the
// journal cannot be read.
func (m *Manager) Events(p protocol.EventsParams, reply session.Reply) {
	dir, e := admission.StateDir(p.StateDir, m.sh.Config.StateDir)
	if e == nil {
		e = admission.CheckKey(p.SessionKey)
	}
	if e != nil {
		reply(nil, e)
		return
	}
	q := journal.Query{Limit: journal.DefaultLimit, Session: p.Session, BySeq: p.AfterSeq != nil || p.Session != ""}
	if p.AfterSeq != nil {
		q.AfterSeq = uint64(*p.AfterSeq)
	}
	if p.AfterN != nil {
		q.AfterN = uint64(*p.AfterN)
	}
	if p.Limit != nil {
		q.Limit = *p.Limit
	}
	sessions := filepath.Join(filepath.Clean(dir), "sessions")
	m.readers.Add(1)
	go func() {
		defer m.readers.Done()
		var page journal.Page
		var err error
		// A journal line is at most an update's line and its entry: a
		// longer one (a segment someone else wrote) is skipped unread.
		q.MaxLine = m.sh.Config.Caps.MaxProviderLineBytes + journal.EntryRoom
		if j, release := m.sh.Journals.Live(sessions, p.SessionKey); j != nil {
			page, err = j.Query(q)
			release()
		} else {
			page, err = journal.QueryDir(sessions, p.SessionKey, q)
		}
		if err != nil {
			reply(nil, launch.StoreUnavailable("the session journal cannot be read", err))
			return
		}
		gaps := make([]protocol.JournalGap, len(page.Gaps))
		for i, g := range page.Gaps {
			gaps[i] = protocol.JournalGap{FromN: g.FromN, ToN: g.ToN, Reason: g.Reason}
		}
		reply(protocol.EventsResult{Events: page.Events, NextN: page.NextN, NextSeq: page.NextSeq, Gaps: gaps,
			Complete: page.Complete, Truncated: page.Truncated}, nil)
	}()
}
