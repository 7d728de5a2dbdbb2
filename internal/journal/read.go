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
// torn by a crash) are skipped. A journal that does not exist reads as
// empty.
func ReadDir(sessionsDir, key string, afterSeq uint64, limit int) (Page, error) {
	return read(sessionsDir, Stem(key), afterSeq, limit)
}

func read(dir, stem string, afterSeq uint64, limit int) (Page, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	if limit > MaxLimit {
		limit = MaxLimit
	}
	page := Page{Events: []json.RawMessage{}, NextSeq: afterSeq}
	want := func(seq uint64) bool { return afterSeq == 0 || seq > afterSeq }
	oldest := Segments - 1
	if first, ok, err := firstHead(SegmentPath(dir, stem, oldest)); err != nil {
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
		path := SegmentPath(dir, stem, i)
		if afterSeq > 0 {
			if seq, ok := lastSeqOf(path); !ok || seq <= afterSeq {
				continue // nothing wanted in this segment
			}
		}
		done, err := scan(path, func(line []byte) bool {
			h, ok := parseHead(line)
			if !ok || !want(h.Seq) || !json.Valid(line) {
				return true
			}
			if taken >= limit && h.Seq != last && last > 0 {
				return false
			}
			page.Events = append(page.Events, append(json.RawMessage(nil), line...))
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

// scan calls fn with every line of path (without its '\n'; a last line
// without one is ignored: it may be a write in progress) until fn returns
// false; it reports whether fn stopped it. A missing file scans as empty.
func scan(path string, fn func(line []byte) bool) (stopped bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 256<<10)
	var long []byte
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			long = append(long, chunk...)
			continue
		case err == io.EOF:
			return false, nil
		case err != nil:
			return false, err
		}
		line := chunk[:len(chunk)-1]
		if long != nil {
			long = append(long, line...)
			line = long
		}
		if !fn(line) {
			return true, nil
		}
		long = nil
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

// firstHead returns the head of the first whole entry of path.
func firstHead(path string) (head, bool, error) {
	var h head
	var found bool
	_, err := scan(path, func(line []byte) bool {
		if hh, ok := parseHead(line); ok && json.Valid(line) {
			h, found = hh, true
			return false
		}
		return true
	})
	return h, found, err
}
