package journal

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
)

// Query selects the entries of one session/events read
// (docs/protocol.md §16): by n, the entries with n > AfterN; or, BySeq,
// the entries of Session ("" = the latest session: the last entry's)
// with seq > AfterSeq — with AfterSeq 0 every entry of that session kept,
// also those before its first update (seq 0). At most Limit entries (≤ 0
// means DefaultLimit, capped at MaxLimit); a BySeq page never ends inside
// one seq's entries. Lines longer than MaxLine bytes (≤ 0 means
// DefaultMaxLineBytes) are skipped unread.
type Query struct {
	// AfterN selects entries with n > AfterN (when not BySeq).
	AfterN uint64
	// BySeq selects by Session and AfterSeq instead of by n.
	BySeq bool
	// Session is the session whose entries a BySeq read returns; "": the
	// latest session.
	Session string
	// AfterSeq selects entries with seq > AfterSeq (BySeq); 0 keeps every
	// entry of the session.
	AfterSeq uint64
	// Limit is the most entries returned; ≤ 0: DefaultLimit; capped at
	// MaxLimit.
	Limit int
	// MaxLine is the longest line read, in bytes; longer ones are skipped
	// unread; ≤ 0: DefaultMaxLineBytes.
	MaxLine int
}

// appendUint is strconv.AppendUint in base 10.
func appendUint(b []byte, v uint64) []byte { return strconv.AppendUint(b, v, 10) }

// legacySession returns the session id a legacy line's params begin
// with (`,"params":{"session":"s-…"`), or nil.
func legacySession(line []byte) []byte {
	i := bytes.Index(line, []byte(`","params":{"session":"`))
	if i < 0 {
		return nil
	}
	rest := line[i+len(`","params":{"session":"`):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || end > 64 {
		return nil
	}
	for _, c := range rest[:end] {
		if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return nil
		}
	}
	return rest[:end]
}

// QueryDir reads key's journal in sessionsDir from disk (the sidecar that
// wrote it may be gone) as q selects. Page.Gaps names every range of n
// the selected range lacks — a gap entry's (MethodGap, returned as well),
// entries dropped by rotation ("rotated", Truncated), numbers missing
// without one ("missing": a write torn by a crash) — and Complete is true
// only without any. Lines that are not whole JSON objects are skipped;
// entries are cleaned for the host (jsonl.CleanRaw). A journal that does
// not exist reads as empty and complete; a segment that is a link, not the
// sidecar's uid's or writable by others is an error (store.ErrUnsafeFile).
func QueryDir(sessionsDir, key string, q Query) (Page, error) {
	return query(sessionsDir, Stem(key), q)
}

func query(dir, stem string, q Query) (Page, error) {
	maxLine, limit := q.MaxLine, q.Limit
	if maxLine <= 0 {
		maxLine = DefaultMaxLineBytes
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	if limit > MaxLimit {
		limit = MaxLimit
	}
	page := Page{Events: []json.RawMessage{}, NextSeq: q.AfterSeq, NextN: q.AfterN, Gaps: []Gap{}}
	base, legacy, err := legacyNumbering(dir, stem, maxLine)
	if err != nil {
		return page, err
	}
	session := q.Session
	if q.BySeq && session == "" {
		_, session, _ = lastEntryOf(dir, stem)
	}
	oldest := Segments - 1
	first, rotated, err := firstHead(dir, segmentName(stem, oldest), maxLine)
	if err != nil {
		return page, err
	}
	if rotated && q.BySeq && first.Session == session {
		g := q.AfterSeq + 1
		if q.AfterSeq == 0 {
			g = 1
		}
		page.Truncated = first.Seq > g || (first.Seq == g && first.Method != MethodUpdate)
	}
	var legacyIndex uint64
	var prevN uint64 // n of the entry before, in journal order (0: none yet)
	seenAny := false
	var lastSeq uint64
	taken := 0
	var pending []Gap // by seq: numbers missing since the last entry taken
	addGap := func(g Gap) {
		if k := len(page.Gaps); k > 0 && page.Gaps[k-1].ToN+1 >= g.FromN && page.Gaps[k-1].Reason == g.Reason {
			page.Gaps[k-1].ToN = max(page.Gaps[k-1].ToN, g.ToN)
			return
		}
		page.Gaps = append(page.Gaps, g)
	}
	for i := oldest; i >= 0; i-- {
		name := segmentName(stem, i)
		if !q.BySeq && !legacy {
			if h, ok := lastHeadOf(dir, name, maxLine); ok && h.HasN && h.N <= q.AfterN {
				prevN, seenAny = h.N, true
				continue // nothing wanted in this segment
			}
		}
		done, err := scan(dir, name, maxLine, func(line []byte) bool {
			h, ok := parseHead(line)
			if !ok || !json.Valid(line) {
				return true
			}
			n := h.N
			if !h.HasN {
				n = base + legacyIndex + 1
				legacyIndex++
			}
			if !seenAny {
				seenAny = true
				if !q.BySeq && n > q.AfterN+1 {
					reason := gapReason(h, line)
					if rotated && reason == "missing" {
						reason, page.Truncated = "rotated", true
					}
					addGap(Gap{FromN: q.AfterN + 1, ToN: n - 1, Reason: reason})
				}
			} else if !q.BySeq && n > prevN+1 && n > q.AfterN+1 {
				addGap(Gap{FromN: max(prevN+1, q.AfterN+1), ToN: n - 1, Reason: gapReason(h, line)})
			} else if q.BySeq && taken > 0 && n > prevN+1 {
				// Numbers missing after the page's first entry: they lie in
				// its range if a later entry of the page follows them (any
				// of them may have been this session's).
				pending = append(pending, Gap{FromN: prevN + 1, ToN: n - 1, Reason: gapReason(h, line)})
			}
			prevN = n
			var want bool
			if q.BySeq {
				want = sessionOf(h, line) == session && (q.AfterSeq == 0 || h.Seq > q.AfterSeq)
			} else {
				want = n > q.AfterN
			}
			if !want {
				return true
			}
			if q.BySeq {
				// A seq's entries are never split across pages, and a page
				// never ends on seq 0: afterSeq 0 means "from the start", so
				// a nextSeq of 0 would hand the same page back forever.
				if taken >= limit && h.Seq != lastSeq && taken > 0 && lastSeq != 0 {
					return false
				}
			} else if taken >= limit {
				return false
			}
			if h.Method == MethodGap && q.BySeq {
				if g, ok := gapOf(line); ok {
					addGap(g)
				}
			}
			out := line
			if !h.HasN {
				out = numbered(line, n)
			}
			for _, g := range pending {
				addGap(g)
			}
			pending = pending[:0]
			page.Events = append(page.Events, jsonl.CleanRaw(append(json.RawMessage(nil), out...)))
			taken++
			lastSeq = h.Seq
			page.NextSeq, page.NextN = h.Seq, n
			return true
		})
		if err != nil {
			return page, err
		}
		if done {
			break
		}
	}
	page.Complete = len(page.Gaps) == 0 && !page.Truncated
	return page, nil
}

// sessionOf is the session of an entry: its head's, or for a legacy line
// the session its params begin with.
func sessionOf(h head, line []byte) string {
	if h.HasN || line == nil {
		return h.Session
	}
	return string(legacySession(line))
}

// gapReason is the reason of the numbers missing before the entry of
// head h: a gap entry's own, else "missing".
func gapReason(h head, line []byte) string {
	if h.Method == MethodGap {
		if g, ok := gapOf(line); ok {
			return g.Reason
		}
	}
	return "missing"
}

// gapOf decodes a gap entry's params.
func gapOf(line []byte) (Gap, bool) {
	var e struct {
		Params Gap `json:"params"`
	}
	if err := json.Unmarshal(line, &e); err != nil || e.Params.ToN < e.Params.FromN {
		return Gap{}, false
	}
	return e.Params, true
}

// Query reads entries of this journal as QueryDir does, after flushing
// what is buffered. While the journal is degraded the entries lost so far
// are a gap too (its reason the write error), so Complete is false.
func (j *Journal) Query(q Query) (Page, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	_ = j.flushLocked()
	page, err := query(j.dir, j.stem, q)
	if err == nil && j.h.degraded && j.h.gapTo > q.AfterN {
		page.Gaps = append(page.Gaps, Gap{FromN: max(j.h.gapFrom, q.AfterN+1), ToN: j.h.gapTo, Reason: ErrReason(j.h.err)})
		page.Complete = false
	}
	return page, err
}
