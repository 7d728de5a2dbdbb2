package adapter

import (
	"path/filepath"

	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Events answers session/events (docs/protocol.md §16): the journal
// entries of p.SessionKey in p.StateDir (default --state-dir) after
// p.AfterSeq, at most p.Limit. It serves a live session's journal (what
// it buffered included), a closed one's, or one a dead sidecar left on
// disk. The read runs off the host's read loop. Errors: -32602 for a key
// too long for a file name or no stateDir; STORE_UNAVAILABLE when the
// journal cannot be read.
func (m *Manager) Events(p protocol.EventsParams, reply Reply) {
	dir := p.StateDir
	if dir == "" {
		dir = m.cfg.StateDir
	}
	if dir == "" {
		reply(nil, protocol.InvalidParams("stateDir", "stateDir is required (no --state-dir default)"))
		return
	}
	if err := store.ValidateKey(p.SessionKey); err != nil {
		reply(nil, protocol.InvalidParams("sessionKey", "sessionKey is too long for a record file name once encoded ("+
			itoa(store.MaxEncodedKeyLen)+" bytes of encodeURIComponent)"))
		return
	}
	var after uint64
	if p.AfterSeq != nil {
		after = uint64(*p.AfterSeq)
	}
	limit := journal.DefaultLimit
	if p.Limit != nil {
		limit = *p.Limit
	}
	sessions := filepath.Join(filepath.Clean(dir), "sessions")
	m.readers.Add(1)
	go func() {
		defer m.readers.Done()
		var page journal.Page
		var err error
		// A journal line is at most an update's line and its entry: a
		// longer one (a segment someone else wrote) is skipped unread.
		maxLine := m.cfg.MaxProviderLineBytes + 64<<10
		if j, release := m.liveJournal(sessions, p.SessionKey); j != nil {
			page, err = j.ReadLimited(after, limit, maxLine)
			release()
		} else {
			page, err = journal.ReadDirLimited(sessions, p.SessionKey, after, limit, maxLine)
		}
		if err != nil {
			reply(nil, protocol.Domain(protocol.ErrStoreUnavailable, "the session journal cannot be read: "+errText(err), true))
			return
		}
		reply(protocol.EventsResult{Events: page.Events, NextSeq: page.NextSeq, Truncated: page.Truncated}, nil)
	}()
}
