package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
)

// DefaultLimit and MaxLimit bound the entries of one Read (session/events
// `limit`).
const (
	DefaultLimit = 1000
	MaxLimit     = 10000
)

// Page is one answer of Read. Events are whole journal lines (objects
// {"n","session","seq","method","params","at"}, package doc) in journal
// order; NextSeq is the seq of the last one (afterSeq when there is
// none): the afterSeq of the next call. Truncated: entries the caller
// asked for were dropped by rotation before this read.
type Page struct {
	// Events are the entries read, whole journal lines in journal order;
	// empty, never nil, when there are none.
	Events []json.RawMessage
	// NextSeq is the seq of the last event, else the query's AfterSeq.
	NextSeq uint64
	// Truncated: entries asked for were dropped by rotation before this
	// read.
	Truncated bool
	// NextN is the n of the last event (the query's AfterN when there is
	// none): the afterN of the next read by n.
	NextN uint64
	// Gaps are the ranges of n the read range lacks, oldest first
	// (Query); Complete: there are none and nothing was truncated.
	Gaps []Gap
	// Complete: Gaps is empty and Truncated is false.
	Complete bool
}

// ReadDir reads key's journal in sessionsDir from disk (the sidecar that
// wrote it may be gone): the entries of its latest session (QueryDir
// BySeq) with seq > afterSeq — with afterSeq 0, every entry of that
// session kept, also those before the first update (seq 0) — at most
// limit of them (≤ 0 means DefaultLimit, capped at MaxLimit), except that
// a page never ends inside one seq's entries (an update and the notices
// that followed it), so the next call with afterSeq = NextSeq neither
// repeats nor skips any. Lines that are not whole JSON objects (a write
// torn by a crash) are skipped, and so are lines longer than
// DefaultMaxLineBytes, unread; an entry is cleaned for the host
// (jsonl.CleanRaw: a segment another process wrote may hold bytes that are
// not UTF-8). A journal that does not exist reads as empty; a segment that
// is a link, not the sidecar's uid's or writable by others is an error
// (store.ErrUnsafeFile), never read.
func ReadDir(sessionsDir, key string, afterSeq uint64, limit int) (Page, error) {
	return read(sessionsDir, Stem(key), afterSeq, limit, 0)
}

// ReadDirLimited is ReadDir skipping lines longer than maxLine bytes (≤ 0
// means DefaultMaxLineBytes): a reader holds at most about maxLine bytes
// of a line, whatever the segment holds (docs/protocol.md §20).
func ReadDirLimited(sessionsDir, key string, afterSeq uint64, limit, maxLine int) (Page, error) {
	return read(sessionsDir, Stem(key), afterSeq, limit, maxLine)
}

func read(dir, stem string, afterSeq uint64, limit, maxLine int) (Page, error) {
	return query(dir, stem, Query{BySeq: true, AfterSeq: afterSeq, Limit: limit, MaxLine: maxLine})
}

// scan calls fn with every line of segment name in dir (without its '\n';
// a last line without one is ignored: it may be a write in progress) until
// fn returns false; it reports whether fn stopped it. A line longer than
// the read buffer is measured first, without being held, and read (pread)
// only when it is at most maxLine bytes; a longer one is skipped. A
// missing file scans as empty.
func scan(dir, name string, maxLine int, fn func(line []byte) bool) (stopped bool, err error) {
	f, err := openSegment(dir, name)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 256<<10)
	var off int64 // where the current line starts
	for {
		start := off
		chunk, err := r.ReadSlice('\n')
		n := int64(len(chunk))
		long := err == bufio.ErrBufferFull
		for err == bufio.ErrBufferFull {
			chunk, err = r.ReadSlice('\n')
			n += int64(len(chunk))
		}
		switch {
		case err == io.EOF:
			return false, nil
		case err != nil:
			return false, err
		}
		off = start + n
		if n-1 > int64(maxLine) {
			continue // over the cap: skipped, never held
		}
		line := chunk[:len(chunk)-1]
		if long {
			line = make([]byte, n-1)
			if _, err := f.ReadAt(line, start); err != nil {
				return false, err
			}
		}
		if !fn(line) {
			return true, nil
		}
	}
}

// head is the start of a journal line: N and Session when it has them
// (HasN; a line written before n existed has neither), Seq and Method.
type head struct {
	N       uint64
	HasN    bool
	Session string
	Seq     uint64
	Method  string
}

// parseHead reads `{"n":K,"session":"S","seq":N,"method":"M"` (session
// optional) or the older `{"seq":N,"method":"M"` at the start of line, as
// Append writes it, without decoding the rest.
func parseHead(line []byte) (head, bool) {
	const p0, p1, p2 = `{"n":`, `"seq":`, `,"method":"`
	var h head
	rest := line
	switch {
	case bytes.HasPrefix(rest, []byte(p0)):
		v, k := leadingUint(rest[len(p0):])
		if k == 0 {
			return head{}, false
		}
		h.N, h.HasN = v, true
		rest = rest[len(p0)+k:]
		if s, ok := bytes.CutPrefix(rest, []byte(`,"session":"`)); ok {
			end := bytes.IndexByte(s, '"')
			if end < 0 {
				return head{}, false
			}
			h.Session, rest = string(s[:end]), s[end+1:]
		}
		if len(rest) == 0 || rest[0] != ',' {
			return head{}, false
		}
		rest = rest[1:]
	case len(rest) > 0 && rest[0] == '{':
		rest = rest[1:]
	default:
		return head{}, false
	}
	if !bytes.HasPrefix(rest, []byte(p1)) {
		return head{}, false
	}
	rest = rest[len(p1):]
	seq, n := leadingUint(rest)
	if n == 0 || !bytes.HasPrefix(rest[n:], []byte(p2)) {
		return head{}, false
	}
	rest = rest[n+len(p2):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return head{}, false
	}
	h.Seq, h.Method = seq, string(rest[:end])
	return h, true
}

// leadingUint parses the decimal digits (at most 20) at the start of b:
// their value and count.
func leadingUint(b []byte) (uint64, int) {
	var v uint64
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' && n < 20 {
		v = v*10 + uint64(b[n]-'0')
		n++
	}
	return v, n
}

// firstHead returns the head of the first whole entry of segment name.
func firstHead(dir, name string, maxLine int) (head, bool, error) {
	var h head
	var found bool
	_, err := scan(dir, name, maxLine, func(line []byte) bool {
		if hh, ok := parseHead(line); ok && json.Valid(line) {
			if !hh.HasN {
				hh.Session = string(legacySession(line))
			}
			h, found = hh, true
			return false
		}
		return true
	})
	return h, found, err
}
