package client

import (
	"context"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Each alias is its own documented public name (doc.go, Types), like types.go's: alike only in form.

// JournalNotice is the session/journal notification: State "degraded"
// (writes of File — "journal", "record" or "ledger" — fail with Error;
// entries from SinceSeq on may be missing) or "ok" (they work again; for
// the journal, Gap names the entries lost) (docs/protocol.md §16).
type JournalNotice = protocol.JournalNotice

// JournalGap is a range of journal entry numbers [FromN, ToN] a reader
// will not find, and why ("ENOSPC: no space left on device", "rotated",
// "missing").
type JournalGap = protocol.JournalGap

// Persistence is session/status `persistence`: Journal and Record are
// "ok" or "degraded".
type Persistence = protocol.Persistence

// EventsParams are the params of session/events: by default the entries
// of every session of SessionKey after entry number AfterN; with AfterSeq
// or Session, those of Session (default the latest) after seq AfterSeq
// (docs/protocol.md §16).
type EventsParams = protocol.EventsParams

// EventsResult is the result of session/events: Events are journal
// entries verbatim ({"n","session","seq","method","params","at"}); NextN
// (NextSeq) is the next AfterN (AfterSeq); Gaps the ranges of n the
// answer's range lacks; Complete true only without any and untruncated.
type EventsResult = protocol.EventsResult

// Events runs session/events once. Errors: the sidecar's (-32602 for bad
// params, STORE_UNAVAILABLE), DataCodeTransport, DataCodeCancelled.
func (c *Client) Events(ctx context.Context, p EventsParams) (*EventsResult, error) {
	var res EventsResult
	if err := c.call(ctx, protocol.MethodSessionEvents, p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// JournalPages pages through a key's journal: each non-empty page goes
// to fn in order, until a page is empty or fn returns false. By default
// it pages by n over every session of the key from p.AfterN (each next
// page after the last page's NextN); with p.AfterSeq or p.Session set it
// pages that session by seq (NextSeq). Nothing is skipped or repeated;
// whether every page was complete is the AND of their Complete. Errors
// as for Events.
func (c *Client) JournalPages(ctx context.Context, p EventsParams, fn func(*EventsResult) bool) error {
	bySeq := p.AfterSeq != nil || p.Session != ""
	for {
		page, err := c.Events(ctx, p)
		if err != nil {
			return err
		}
		if len(page.Events) == 0 || !fn(page) {
			return nil
		}
		if bySeq {
			next := int64(page.NextSeq)
			p.AfterSeq = &next
		} else {
			next := int64(page.NextN)
			p.AfterN = &next
		}
	}
}
