package client

import (
	"bytes"
	"io"
	"sync"
)

// stderrTailBytes is how much of the end of the sidecar's stderr a Client
// keeps (Client.StderrTail, the Start error). The sidecar's stderr carries
// its JSON logs and flag errors, never a launch secret (docs/protocol.md
// §13); the cap bounds the memory and the error message.
const stderrTailBytes = 4096

// stderrTee receives the sidecar's stderr: it keeps the last
// stderrTailBytes bytes and copies everything to out (Options.Stderr, may
// be nil). A failing or short out never stops the copy, so the sidecar
// never blocks on a full stderr pipe because of it.
type stderrTee struct {
	out io.Writer

	mu   sync.Mutex
	tail []byte
	cut  bool // bytes before tail were dropped
}

// Write implements io.Writer; it always consumes all of p.
func (t *stderrTee) Write(p []byte) (int, error) {
	t.mu.Lock()
	if len(p) >= stderrTailBytes {
		t.cut = t.cut || len(t.tail) > 0 || len(p) > stderrTailBytes
		t.tail = append(t.tail[:0], p[len(p)-stderrTailBytes:]...)
	} else {
		if over := len(t.tail) + len(p) - stderrTailBytes; over > 0 {
			t.cut = true
			t.tail = append(t.tail[:0], t.tail[over:]...)
		}
		t.tail = append(t.tail, p...)
	}
	t.mu.Unlock()
	if t.out != nil {
		_, _ = t.out.Write(p)
	}
	return len(p), nil
}

// Tail returns a copy of the kept end of the stream. When the stream was
// cut, the partial first line is dropped (a whole line reads better in an
// error).
func (t *stderrTee) Tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.tail
	if t.cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i+1 < len(b) {
			b = b[i+1:]
		}
	}
	return string(bytes.TrimRight(b, "\n"))
}
