package jsonl

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Writer writes frames to a byte stream. It is safe for concurrent use:
// writes are serialized, so a frame is never interleaved with another.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	framing Framing
	buf     []byte // reused frame buffer (mu held)
}

// maxKeptBuf bounds the frame buffer a Writer keeps between writes.
const maxKeptBuf = 1 << 20

// NewWriter returns a Writer to w in the given framing (anything but LSP
// writes NDJSON).
func NewWriter(w io.Writer, framing Framing) *Writer {
	return &Writer{w: w, framing: framing}
}

// WriteObject marshals v with encoding/json and writes it as one frame. A
// frame that is not valid UTF-8 (encoding/json keeps a json.RawMessage's
// bytes as they are) is cleaned first (Clean): a frame is always valid
// NDJSON. It returns the marshalling error or the underlying writer's
// error.
func (w *Writer) WriteObject(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if !utf8.Valid(b) {
		b = Clean(make([]byte, 0, len(b)+8), b)
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
	buf := append(append(w.buf[:0], b...), '\n')
	_, err := w.w.Write(buf)
	w.keep(buf)
	return err
}

// WriteNotification writes the JSON-RPC 2.0 notification
// {"jsonrpc":"2.0","method":<method>,"params":<params>} as one frame in
// one write, params verbatim: it must be one JSON value (an object or
// array), without a line break under NDJSON. method is a plain method name
// (quoted as a JSON string). It returns the underlying writer's error.
func (w *Writer) WriteNotification(method string, params []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.appendNotification(w.buf[:0], method, params)
	_, err := w.w.Write(b)
	w.keep(b)
	return err
}

// Notification is one notification for WriteNotifications: Params are
// written verbatim (one JSON value, without a line break under NDJSON).
type Notification struct {
	// Method is the plain method name, written as a JSON string.
	Method string
	// Params is the params value's JSON text, written verbatim.
	Params []byte
}

// WriteNotifications writes ns, in order, as consecutive frames shaped as
// WriteNotification's, with no other write in between: one write per
// maxKeptBuf (1 MiB) of frames — one write(2) for a batch of ordinary
// updates; a frame larger than that gets a write of its own. It blocks
// while the underlying writer does (backpressure) and stops at the first
// error, which it returns: the frames before it were written, the failed
// write's may be in part, none after it.
func (w *Writer) WriteNotifications(ns []Notification) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buf[:0]
	for i, n := range ns {
		b = w.appendNotification(b, n.Method, n.Params)
		if len(b) >= maxKeptBuf || i == len(ns)-1 {
			if _, err := w.w.Write(b); err != nil {
				w.keep(b)
				return err
			}
			if i < len(ns)-1 && cap(b) > maxKeptBuf {
				b = nil // one huge frame: do not copy the next ones into it
			} else {
				b = b[:0]
			}
		}
	}
	w.keep(b)
	return nil
}

// appendNotification appends one notification frame (with its LSP header
// or NDJSON terminator) to b.
func (w *Writer) appendNotification(b []byte, method string, params []byte) []byte {
	const head, mid = `{"jsonrpc":"2.0","method":`, `,"params":`
	if w.framing == LSP {
		n := len(head) + jsonStringLen(method) + len(mid) + len(params) + 1
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, "\r\n\r\n"...)
	}
	b = append(b, head...)
	b = appendJSONString(b, method)
	b = append(b, mid...)
	b = append(b, params...)
	b = append(b, '}')
	if w.framing != LSP {
		b = append(b, '\n')
	}
	return b
}

func (w *Writer) keep(b []byte) {
	if cap(b) <= maxKeptBuf {
		w.buf = b[:0]
	} else {
		w.buf = nil
	}
}

// appendJSONString appends s as a JSON string: '"', '\\' and control
// characters escaped, everything else as it is.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	if jsonStringLen(s) == len(s)+2 { // nothing to escape (a method name): one copy
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// jsonStringLen is len(appendJSONString(nil, s)).
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			n += 2
		case c < 0x20:
			n += 6
		default:
			n++
		}
	}
	return n
}
