// Package journal keeps a session key's journal: every notification the
// sidecar sends the host for that session, one JSON object a line, in
// `<stateDir>/sessions/<stem>.journal.ndjson` and up to three rotated
// segments beside it (docs/protocol.md §16, Session journal). A host that
// lost frames (it crashed, or the sidecar was killed) reads them back with
// session/events, also from a later sidecar.
//
// One line is {"n": k, "session": "s-…", "seq": n, "method": "…",
// "params": {…}, "at": "…"}: n the key-wide entry number (from 1, one
// more per entry, across every session of the key and every sidecar that
// wrote it), session the sidecar's session id, params the notification's
// params as sent (raw JSON bytes, never re-encoded), seq the
// session/update's seq, or for any other method the seq of the last
// update of that session before it, at the time it was appended (RFC
// 3339, UTC, nanoseconds; the clock is read once per write(2): the entries
// a Flush writes together carry the time the first of them was appended).
// A key's journal keeps every session of the key
// (docs/protocol.md §16): only rotation by size drops entries. Lines
// written before n existed ({"seq":…,"method":…} first) are read as
// numbered by their place (legacy.go).
//
// An append that cannot be written (ENOSPC, EIO, EDQUOT) degrades the
// journal instead of losing silently: the entries from then on are
// counted, not kept, each Flush retries, and the first write that works
// is a gap entry (MethodGap) naming the n's lost (health.go).
//
// Durability: Append only buffers; Flush hands the buffer to the kernel in
// one write(2). The caller flushes before it writes the frames of the
// appended entries to the host (so a SIGKILL of the sidecar never loses
// an entry the host could have seen), batching as many entries per write
// as it has frames queued; Sync also fsyncs (turn end, close).
package journal

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// DefaultMaxBytes is the default size at which the live segment is rotated
// (--journal-max-bytes): 64 MiB.
const DefaultMaxBytes = 64 << 20

// Segments is how many segment files a journal keeps at most: the live one
// and three rotated ones; the oldest is dropped at a rotation.
const Segments = 4

// MethodUpdate is the method whose entries carry their own seq
// (session/update); every other entry carries the last update's.
const MethodUpdate = "session/update"

// maxStem bounds a journal file-name stem so that the longest segment
// name, "<stem>.journal.3.ndjson", fits NAME_MAX (255 bytes).
const maxStem = 255 - len(".journal.3.ndjson")

// Stem is the file-name stem of key's journal: store.EncodeKey(key) (the
// record's stem, encodeURIComponent), or, for a key whose encoding is too
// long for the segment names (over 238 bytes), its first 200 bytes, "%h"
// and the hex SHA-256 of the key (128 bits). "%h" never occurs in
// encodeURIComponent's output, so the long form cannot name another key's
// journal.
func Stem(key string) string {
	return store.FileStem(key, 255-maxStem)
}

// EntryRoom is what a journal line may hold beyond the update it carries
// (the entry around it): a reader's line bound is the provider line bound
// plus this.
const EntryRoom = 64 << 10

// DefaultMaxLineBytes bounds a journal line a reader holds: the default
// --max-provider-line-bytes (an update's line) plus EntryRoom. A longer
// line is skipped unread (docs/protocol.md §20).
const DefaultMaxLineBytes = protocol.DefaultMaxProviderLineBytes + EntryRoom

// segmentName is SegmentPath's file name.
func segmentName(stem string, i int) string {
	return filepath.Base(SegmentPath("", stem, i))
}

// openSegment opens segment name in dir for reading through a
// store.SafeDir (a link, a foreign or shared file is refused).
func openSegment(dir, name string) (*os.File, error) {
	d, err := store.OpenSafeDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.OpenFile(name, os.O_RDONLY, 0)
}

// SegmentPath is the path of segment i (0 = live, 1…Segments-1 rotated,
// higher = older) of the journal with stem in sessionsDir:
// <stem>.journal.ndjson, <stem>.journal.1.ndjson, … .3.ndjson.
func SegmentPath(sessionsDir, stem string, i int) string {
	if i == 0 {
		return filepath.Join(sessionsDir, stem+".journal.ndjson")
	}
	return filepath.Join(sessionsDir, stem+".journal."+strconv.Itoa(i)+".ndjson")
}

// Journal is one session key's open journal. It is safe for concurrent
// use (a mutex; the session actor is its usual only writer).
type Journal struct {
	mu      sync.Mutex
	dir     string
	stem    string
	max     int64
	f       *os.File
	size    int64  // bytes of the live segment, pending included
	buf     []byte // appended, not yet written
	lastSeq uint64
	// lastN is the n of the last entry appended (0 if none); lastSession
	// the session that appended it (lastSeq is that session's).
	lastN       uint64
	lastSession string
	// bufFirstN and bufFirstSeq are the n and seq of the first entry in
	// buf.
	bufFirstN, bufFirstSeq uint64
	h                      health // degraded state (health.go)
	written                bool   // written since the last fsync
	closed                 bool
	// secPrefix is "2006-01-02T15:04:05." of second sec (UTC): the clock
	// is formatted once a second, not once an entry.
	sec       int64
	secPrefix []byte
	// at is the stamp of the entries in buf (appendTime's form of the
	// clock read at the first of them), valid while buf is not empty.
	at []byte
}

// ErrClosed is returned by the methods of a closed Journal.
var ErrClosed = errors.New("journal: closed")

// Open opens (creating it, mode 0600) the journal of key in sessionsDir
// (<stateDir>/sessions, which must exist) with segment size maxBytes (≤ 0
// means DefaultMaxBytes). A torn last line left by a killed writer is
// terminated, so readers skip it. Errors are the file system's.
func Open(sessionsDir, key string, maxBytes int64) (*Journal, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	j := &Journal{dir: sessionsDir, stem: Stem(key), max: maxBytes}
	if err := j.openLive(); err != nil {
		return nil, err
	}
	j.lastN, j.lastSession, j.lastSeq = lastEntryOf(j.dir, j.stem)
	return j, nil
}

// openLive opens (creating it exclusively when missing) the live segment
// through a store.SafeDir: a segment that is a link, not the sidecar's
// uid's or writable by others is refused, never appended to
// (docs/protocol.md §20).
func (j *Journal) openLive() error {
	d, err := store.OpenSafeDir(j.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	f, err := d.OpenFile(segmentName(j.stem, 0), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	j.f, j.size = f, st.Size()
	if j.size > 0 && !endsInNewline(f, j.size) {
		if _, err := f.Write([]byte{'\n'}); err != nil {
			f.Close()
			return err
		}
		j.size++
	}
	return nil
}

func endsInNewline(f *os.File, size int64) bool {
	b := make([]byte, 1)
	_, err := f.ReadAt(b, size-1)
	return err != nil || b[0] == '\n'
}

// LastSeq is the highest seq appended so far (0 if none).
func (j *Journal) LastSeq() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lastSeq
}

// AppendUpdate buffers a session/update entry with the update's seq and
// no session; params are its params as sent (valid JSON without a line
// break). The sidecar's sessions use AppendUpdateOf.
func (j *Journal) AppendUpdate(seq uint64, params []byte) {
	j.AppendUpdateOf("", seq, params)
}

// AppendUpdateOf buffers a session/update entry of session (an id made
// of JSON-safe characters, as the sidecar's "s-"+hex) with the update's
// seq.
func (j *Journal) AppendUpdateOf(session string, seq uint64, params []byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.appendLocked(session, seq, MethodUpdate, params)
}

// AppendNotice buffers an entry of any other method, with the seq of the
// last update appended and no session.
func (j *Journal) AppendNotice(method string, params []byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.appendLocked("", j.lastSeq, method, params)
}

// AppendNoticeOf buffers an entry of any other method of session, with
// seq (the last update's seq of that session).
func (j *Journal) AppendNoticeOf(session string, seq uint64, method string, params []byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.appendLocked(session, seq, method, params)
}

// AppendSessionNotice is AppendNoticeOf with the seq the journal last
// saw of session: the last entry's seq when session appended it, else 0
// (for writers outside the session's actor: a retained cleanup's proof).
func (j *Journal) AppendSessionNotice(session, method string, params []byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	seq := uint64(0)
	if session == j.lastSession {
		seq = j.lastSeq
	}
	j.appendLocked(session, seq, method, params)
}

func (j *Journal) appendLocked(session string, seq uint64, method string, params []byte) {
	if j.closed {
		return
	}
	j.lastN++
	j.lastSession, j.lastSeq = session, seq
	if j.h.degraded {
		j.h.gapTo = j.lastN // counted, not kept (health.go)
		return
	}
	n := int64(len(`{"n":,"session":"","seq":,"method":"","params":,"at":""}`+"\n") + 40 + len(session) + len(method) + len(params) + 35)
	if j.size > 0 && j.size+n > j.max {
		j.rotateLocked()
	}
	start := len(j.buf)
	if start == 0 {
		j.bufFirstN, j.bufFirstSeq = j.lastN, seq
		j.at = j.appendTime(j.at[:0], time.Now())
	}
	b := append(j.buf, `{"n":`...)
	b = strconv.AppendUint(b, j.lastN, 10)
	if session != "" {
		b = append(b, `,"session":"`...)
		b = append(b, session...)
		b = append(b, '"')
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"method":"`...)
	b = append(b, method...)
	b = append(b, `","params":`...)
	b = append(b, params...)
	b = append(b, `,"at":"`...)
	b = append(b, j.at...)
	b = append(b, "\"}\n"...)
	j.buf = b
	j.size += int64(len(b) - start)
}

// appendTime appends t as RFC 3339 UTC with nine fractional digits
// (protocol.TimeLayout's shape, "Z" for UTC).
func (j *Journal) appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	if sec := t.Unix(); sec != j.sec || j.secPrefix == nil {
		j.sec = sec
		j.secPrefix = append(t.AppendFormat(j.secPrefix[:0], "2006-01-02T15:04:05"), '.')
	}
	b = append(b, j.secPrefix...)
	ns := t.Nanosecond()
	var d [9]byte
	for i := 8; i >= 0; i-- {
		d[i] = byte('0' + ns%10)
		ns /= 10
	}
	b = append(b, d[:]...)
	return append(b, 'Z')
}

// rotateLocked writes what is pending to the live segment, then renames
// live → .1 → .2 → .3 (the old .3 is dropped) and starts a new live one.
// The closed segment is not fsynced here (that would stall the session
// on up to --journal-max-bytes of writeback); the kernel writes it back.
// A failure leaves appending to whatever live file exists.
func (j *Journal) rotateLocked() {
	_ = j.flushLocked()
	if j.f != nil {
		_ = j.f.Close()
		j.f = nil
	}
	if d, err := store.OpenSafeDir(j.dir); err == nil {
		for i := Segments - 2; i >= 0; i-- {
			_ = d.Rename(segmentName(j.stem, i), segmentName(j.stem, i+1))
		}
		d.Close()
	}
	j.size = 0
	_ = j.openLive()
}

// Flush writes every buffered entry to the live segment in one write(2).
func (j *Journal) Flush() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.flushLocked()
}

func (j *Journal) flushLocked() error {
	if j.h.degraded {
		return j.retryLocked() // health.go
	}
	if len(j.buf) == 0 {
		return nil
	}
	if j.f == nil {
		err := j.degradeLocked(0, ErrClosed)
		j.buf = j.buf[:0]
		return err
	}
	w, err := j.f.Write(j.buf)
	if err != nil {
		err = j.degradeLocked(w, err)
	}
	j.buf = j.buf[:0]
	j.written = true
	return err
}

// Sync flushes and fsyncs the live segment (when anything was written
// since the last Sync).
func (j *Journal) Sync() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	err := j.flushLocked()
	if j.f != nil && j.written {
		j.written = false
		if serr := j.f.Sync(); err == nil {
			err = serr
		}
	}
	return err
}

// Close syncs and closes the journal; later appends are dropped.
func (j *Journal) Close() error {
	err := j.Sync()
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	if j.f != nil {
		if cerr := j.f.Close(); err == nil {
			err = cerr
		}
		j.f = nil
	}
	return err
}

// Read reads entries of this journal as ReadDir does, after flushing what
// is buffered.
func (j *Journal) Read(afterSeq uint64, limit int) (Page, error) {
	return j.ReadLimited(afterSeq, limit, 0)
}

// ReadLimited is Read skipping lines longer than maxLine bytes (≤ 0 means
// DefaultMaxLineBytes) as ReadDirLimited does.
func (j *Journal) ReadLimited(afterSeq uint64, limit, maxLine int) (Page, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	_ = j.flushLocked()
	return read(j.dir, j.stem, afterSeq, limit, maxLine)
}

// Remove deletes every segment of key's journal in sessionsDir (a missing
// one is not an error).
func Remove(sessionsDir, key string) error { return removeStem(sessionsDir, Stem(key)) }

func removeStem(sessionsDir, stem string) error {
	d, err := store.OpenSafeDir(sessionsDir)
	if err != nil {
		return err
	}
	defer d.Close()
	var first error
	for i := 0; i < Segments; i++ {
		if err := d.Remove(segmentName(stem, i)); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
			first = err
		}
	}
	return first
}

// lastHeadOf is the head of the last complete entry of segment name, found
// as lastSeqOf finds it.
func lastHeadOf(dir, name string, maxLine int) (head, bool) {
	f, err := openSegment(dir, name)
	if err != nil {
		return head{}, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return head{}, false
	}
	if maxLine <= 0 {
		maxLine = DefaultMaxLineBytes
	}
	var found head
	ok := false
	_ = linesBackward(f, st.Size(), func(start, end int64) bool {
		if end-start > int64(maxLine) {
			return true // skipped unread
		}
		line := make([]byte, end-start)
		if _, err := f.ReadAt(line, start); err != nil {
			return false
		}
		if h, hok := parseHead(line); hok && json.Valid(line) {
			if !h.HasN {
				h.Session = string(legacySession(line))
			}
			found, ok = h, true
			return false
		}
		return true
	})
	return found, ok
}

// linesBackward calls fn with the [start, end) offsets of every line of f
// (size bytes) that ends in '\n' (end is the '\n”s offset), last first,
// until fn returns false; it reads 64 KiB at a time and holds no line.
func linesBackward(f *os.File, size int64, fn func(start, end int64) bool) error {
	const window = 64 << 10
	buf := make([]byte, window)
	end := int64(-1) // the '\n' ending the line being looked for
	for pos := size; pos > 0; {
		n := int64(window)
		if pos < n {
			n = pos
		}
		b := buf[:n]
		if _, err := f.ReadAt(b, pos-n); err != nil && err != io.EOF {
			return err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' {
				continue
			}
			at := pos - n + int64(i)
			if end >= 0 && !fn(at+1, end) {
				return nil
			}
			end = at
		}
		pos -= n
	}
	if end >= 0 {
		fn(0, end)
	}
	return nil
}
