package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
)

// DefaultLimit and MaxLimit bound the entries of one Read (session/events
// `limit`).
const (
	DefaultLimit = 1000
	MaxLimit     = 10000
)

// Page is one answer of Read. Events are whole journal lines (objects
// {"seq","method","params","at"}) in journal order; NextSeq is the seq of
// the last one (afterSeq when there is none): the afterSeq of the next
// call. Truncated: entries the caller asked for were dropped by rotation
// before this read.
type Page struct {
	Events    []json.RawMessage
	NextSeq   uint64
	Truncated bool
}

// ReadDir reads key's journal in sessionsDir from disk (the sidecar that
// wrote it may be gone): the entries with seq > afterSeq — with afterSeq 0,
// every entry kept, also those before the first update (seq 0) — at most
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
	if maxLine <= 0 {
		maxLine = DefaultMaxLineBytes
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	if limit > MaxLimit {
		limit = MaxLimit
	}
	page := Page{Events: []json.RawMessage{}, NextSeq: afterSeq}
	want := func(seq uint64) bool { return afterSeq == 0 || seq > afterSeq }
	oldest := Segments - 1
	if first, ok, err := firstHead(dir, segmentName(stem, oldest), maxLine); err != nil {
		return page, err
	} else if ok {
		// A .3 segment exists, so a rotation may have dropped older ones:
		// the wanted start is lost if it lies before .3's first entry.
		g := afterSeq + 1
		if afterSeq == 0 {
			g = 1
		}
		page.Truncated = first.Seq > g || (first.Seq == g && first.Method != MethodUpdate)
	}
	var last uint64
	taken := 0
	for i := oldest; i >= 0; i-- {
		name := segmentName(stem, i)
		if afterSeq > 0 {
			if seq, ok := lastSeqOf(dir, name, maxLine); !ok || seq <= afterSeq {
				continue // nothing wanted in this segment
			}
		}
		done, err := scan(dir, name, maxLine, func(line []byte) bool {
			h, ok := parseHead(line)
			if !ok || !want(h.Seq) || !json.Valid(line) {
				return true
			}
			if taken >= limit && h.Seq != last && last > 0 {
				return false
			}
			page.Events = append(page.Events, jsonl.CleanRaw(append(json.RawMessage(nil), line...)))
			last, taken = h.Seq, taken+1
			page.NextSeq = h.Seq
			return true
		})
		if err != nil {
			return page, err
		}
		if done {
			break
		}
	}
	return page, nil
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

// head is the start of a journal line.
type head struct {
	Seq    uint64
	Method string
}

// parseHead reads `{"seq":N,"method":"M"` at the start of line, as Append
// writes it, without decoding the rest.
func parseHead(line []byte) (head, bool) {
	const p1, p2 = `{"seq":`, `,"method":"`
	if !bytes.HasPrefix(line, []byte(p1)) {
		return head{}, false
	}
	rest := line[len(p1):]
	var seq uint64
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' && n < 20 {
		seq = seq*10 + uint64(rest[n]-'0')
		n++
	}
	if n == 0 || !bytes.HasPrefix(rest[n:], []byte(p2)) {
		return head{}, false
	}
	rest = rest[n+len(p2):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return head{}, false
	}
	return head{Seq: seq, Method: string(rest[:end])}, true
}

// firstHead returns the head of the first whole entry of segment name.
func firstHead(dir, name string, maxLine int) (head, bool, error) {
	var h head
	var found bool
	_, err := scan(dir, name, maxLine, func(line []byte) bool {
		if hh, ok := parseHead(line); ok && json.Valid(line) {
			h, found = hh, true
			return false
		}
		return true
	})
	return h, found, err
}
