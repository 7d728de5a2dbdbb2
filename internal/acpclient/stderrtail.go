package acpclient

import (
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// StderrTailBytes is how much of the end of an agent's stderr an open (or
// revive) that fails ACPX_SESSION_ENSURE_FAILED or
// ACPX_SESSION_HANDSHAKE_TIMEOUT reports in data.stderr, redacted like
// every error (issue 33: a misconfigured agent says why on its stderr).
const StderrTailBytes = 4096

// StderrTail keeps the last StderrTailBytes bytes an agent wrote to its
// stderr while it is admitted; once the admission has succeeded it keeps
// nothing (Keep(false)). Stderr is never logged. Safe for concurrent
// use: the drain goroutine writes (and calls Ended), the admission worker
// reads.
type StderrTail struct {
	mu      sync.Mutex
	buf     []byte // the last bytes, at most StderrTailBytes
	keeping bool
	done    chan struct{} // closed when the drain reached EOF
}

// StderrSettle bounds the wait (Text) for a failed agent's stderr to end.
const StderrSettle = 250 * time.Millisecond

// NewStderrTail returns a StderrTail that keeps.
func NewStderrTail() *StderrTail { return &StderrTail{keeping: true, done: make(chan struct{})} }

// Write keeps the end of p (while keeping); it never fails, so the drain
// goes on.
func (t *StderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.keeping {
		return len(p), nil
	}
	if len(p) >= StderrTailBytes {
		t.buf = append(t.buf[:0], p[len(p)-StderrTailBytes:]...)
		return len(p), nil
	}
	if over := len(t.buf) + len(p) - StderrTailBytes; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// Ended records that the agent's stderr has ended (EOF): Text stops
// waiting for it. Call it once.
func (t *StderrTail) Ended() { close(t.done) }

// Keep turns keeping on or off; off drops what was kept.
func (t *StderrTail) Keep(on bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.keeping = on
	if !on {
		t.buf = nil
	}
}

// Text is what was kept, waiting at most d for the agent's stderr to end
// (Ended: its last words are often written as it exits), starting at a
// rune boundary, with invalid UTF-8 replaced. It is not redacted.
func (t *StderrTail) Text(d time.Duration) string {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.done:
	case <-timer.C:
	}
	t.mu.Lock()
	b := append([]byte(nil), t.buf...)
	t.mu.Unlock()
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
