package journal

import (
	"bytes"
	"errors"
	"strconv"
	"syscall"
	"time"
)

// MethodGap is the method of a gap entry: written as the first entry once
// appends work again after a failed write, its params
// {"fromN", "toN", "reason"} name the entries lost (docs/protocol.md §16,
// "Journal: every session of a key, honest about gaps").
const MethodGap = "journal/gap"

// health is a journal's write state. Degraded from the first write that
// fails until a gap entry is written: appends meanwhile only count their
// n (gapTo), every Flush retries.
type health struct {
	degraded bool
	// gapFrom, gapTo: the n's lost so far (inclusive).
	gapFrom, gapTo uint64
	// sinceSeq is the seq of the first entry lost (for a notice: the last
	// update's seq before it).
	sinceSeq uint64
	// torn: a partial write left a line without its '\n'.
	torn bool
	err  error
	// last is the gap entry written when it recovered last.
	last Gap
}

// Gap is a range of entry numbers [FromN, ToN] a reader will not find,
// and why: Reason is the write error of a degraded journal ("ENOSPC: no
// space left on device"), "rotated" (dropped by rotation) or "missing"
// (not in the journal: a write torn by a crash, or a journal edited
// behind the sidecar).
type Gap struct {
	// FromN is the first entry number missing.
	FromN uint64 `json:"fromN"`
	// ToN is the last entry number missing (inclusive).
	ToN uint64 `json:"toN"`
	// Reason is a write error's text, "rotated" or "missing" (above).
	Reason string `json:"reason"`
}

// Health is a snapshot of a journal's write state: Degraded with the
// write error Err since the entry of seq SinceSeq; LastGap is the gap
// entry written at the last recovery (zero if none).
type Health struct {
	// Degraded: a write failed and no gap entry has been written since.
	Degraded bool
	// Err is the latest write error while Degraded; nil otherwise.
	Err error
	// SinceSeq is the seq of the first entry lost while Degraded.
	SinceSeq uint64
	// LastGap is the gap entry written at the last recovery; zero if none.
	LastGap Gap
}

// Health reports the journal's write state.
func (j *Journal) Health() Health {
	j.mu.Lock()
	defer j.mu.Unlock()
	return Health{Degraded: j.h.degraded, Err: j.h.err, SinceSeq: j.h.sinceSeq, LastGap: j.h.last}
}

// degradeLocked enters the degraded state after a write of buf that put
// only written bytes in the file, failing with err: the entries not
// wholly written are lost (their n's are the gap's start). It returns err.
func (j *Journal) degradeLocked(written int, err error) error {
	full := uint64(bytes.Count(j.buf[:written], []byte{'\n'}))
	j.size -= int64(len(j.buf) - written)
	j.h.degraded = true
	j.h.gapFrom, j.h.gapTo = j.bufFirstN+full, j.lastN
	j.h.sinceSeq = j.bufFirstSeq
	j.h.torn = written > 0 && j.buf[written-1] != '\n'
	j.h.err = err
	return err
}

// retryLocked is a degraded journal's Flush: it writes the gap entry (its
// own n the next one), after a '\n' that ends a torn line; when that
// works the journal is healthy again and nil is returned, else the
// entry's n joins the gap and the write error is returned.
func (j *Journal) retryLocked() error {
	if j.f == nil {
		if err := j.openLive(); err != nil { // it terminates a torn tail itself
			j.h.err = err
			return err
		}
		j.h.torn = false
	}
	g := Gap{FromN: j.h.gapFrom, ToN: j.h.gapTo, Reason: ErrReason(j.h.err)}
	if err := j.writeGapLocked(g); err != nil {
		j.h.gapTo = j.lastN
		j.h.err = err
		return err
	}
	j.h = health{last: g}
	return nil
}

// writeGapLocked appends the gap entry g with the next n, after a '\n'
// that ends a torn line, and writes it at once. The caller holds j.mu and
// has the live segment open.
func (j *Journal) writeGapLocked(g Gap) error {
	j.lastN++
	var line []byte
	if j.h.torn {
		line = append(line, '\n')
	}
	line = append(line, `{"n":`...)
	line = strconv.AppendUint(line, j.lastN, 10)
	if j.lastSession != "" {
		line = append(line, `,"session":"`...)
		line = append(line, j.lastSession...)
		line = append(line, '"')
	}
	line = append(line, `,"seq":`...)
	line = strconv.AppendUint(line, j.lastSeq, 10)
	line = append(line, `,"method":"`+MethodGap+`","params":{"fromN":`...)
	line = strconv.AppendUint(line, g.FromN, 10)
	line = append(line, `,"toN":`...)
	line = strconv.AppendUint(line, g.ToN, 10)
	line = append(line, `,"reason":`...)
	line = strconv.AppendQuote(line, g.Reason)
	line = append(line, `},"at":"`...)
	line = j.appendTime(line, time.Now())
	line = append(line, "\"}\n"...)
	w, err := j.f.Write(line)
	if err != nil {
		if w > 0 {
			j.h.torn = line[w-1] != '\n'
			j.size += int64(w)
		}
		return err
	}
	j.size += int64(len(line))
	j.written = true
	return nil
}

// Reserve skips count entry numbers: it writes, and syncs, a gap entry
// {fromN, toN, reason} covering the next count n's, so entries written
// elsewhere under those numbers are never confused with this journal's
// (a key's journal restored on another sidecar, whose previous owner may
// have written more after its last publication; docs/protocol.md §24).
// Errors: the write's or sync's; the numbers are skipped all the same.
func (j *Journal) Reserve(count uint64, reason string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.flushLocked(); err != nil {
		return err
	}
	if j.f == nil {
		if err := j.openLive(); err != nil {
			return err
		}
	}
	g := Gap{FromN: j.lastN + 1, ToN: j.lastN + count, Reason: reason}
	j.lastN += count
	if err := j.writeGapLocked(g); err != nil {
		return err // the next entries go on from the reserved numbers all the same
	}
	return j.f.Sync()
}

// ErrReason is the gap reason of a write error: the errno's name and
// text where it has one ("ENOSPC: no space left on device"), else the
// error's text.
func ErrReason(err error) string {
	if err == nil {
		return "unknown"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := errnoNames[errno]; name != "" {
			return name + ": " + errno.Error()
		}
		return errno.Error()
	}
	return err.Error()
}

var errnoNames = map[syscall.Errno]string{syscall.ENOSPC: "ENOSPC", syscall.EIO: "EIO", syscall.EDQUOT: "EDQUOT",
	syscall.EROFS: "EROFS", syscall.EFBIG: "EFBIG", syscall.EMFILE: "EMFILE", syscall.ENFILE: "ENFILE", syscall.EACCES: "EACCES"}
