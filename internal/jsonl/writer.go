package jsonl

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Writer writes frames to a byte stream. It is safe for concurrent use:
// writes are serialized, so a frame is never interleaved with another.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	framing Framing
}

// NewWriter returns a Writer to w in the given framing (anything but LSP
// writes NDJSON).
func NewWriter(w io.Writer, framing Framing) *Writer {
	return &Writer{w: w, framing: framing}
}

// WriteObject marshals v with encoding/json and writes it as one frame. It
// returns the marshalling error or the underlying writer's error.
func (w *Writer) WriteObject(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return w.WriteFrame(b)
}

// WriteFrame writes b (one message, without terminator; it must not
// contain a line break under NDJSON) as one frame: b and "\n" in a single
// write under NDJSON, "Content-Length: len(b)\r\n\r\n" then b under LSP.
// It blocks while the underlying writer does (backpressure) and returns
// its error.
func (w *Writer) WriteFrame(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.framing == LSP {
		if _, err := fmt.Fprintf(w.w, "Content-Length: %d\r\n\r\n", len(b)); err != nil {
			return err
		}
		_, err := w.w.Write(b)
		return err
	}
	buf := make([]byte, 0, len(b)+1)
	buf = append(append(buf, b...), '\n')
	_, err := w.w.Write(buf)
	return err
}
