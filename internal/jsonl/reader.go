package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Reader reads frames from a byte stream. It is not safe for concurrent
// use (one read loop owns it).
type Reader struct {
	r        *bufio.Reader
	framing  Framing
	maxBytes int
	skip     int64 // LSP body bytes still to discard (an oversized frame's)
}

// NewReader returns a Reader of r in the given framing (anything but LSP
// reads NDJSON). maxBytes bounds one frame, in bytes, without its line
// terminator or LSP header; ≤ 0 means DefaultMaxFrameBytes.
func NewReader(r io.Reader, framing Framing, maxBytes int) *Reader {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFrameBytes
	}
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), framing: framing, maxBytes: maxBytes}
}

// Framing returns the Reader's framing.
func (r *Reader) Framing() Framing { return r.framing }

// LineReady reports whether a whole NDJSON line is already buffered, so
// the next ReadFrame returns without reading from the stream (false for
// LSP framing). A forwarder uses it to batch what arrived together.
func (r *Reader) LineReady() bool {
	if r.framing == LSP {
		return false
	}
	b, _ := r.r.Peek(r.r.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// MaxBytes returns the Reader's frame limit in bytes.
func (r *Reader) MaxBytes() int { return r.maxBytes }

// ReadMessage reads the next frame of the host, checks that it is valid
// UTF-8 and one JSON-RPC 2.0 message, and unmarshals it into v. A bad
// frame is consumed and reported as a *FrameError (v is then unspecified,
// and the caller may read on); any other error (io.EOF when the input ends
// cleanly) ends the stream. Invalid UTF-8 is a Malformed frame here (JSON
// text is UTF-8, RFC 8259 §8.1; decoding would replace the bad bytes with
// U+FFFD, so an id or a sessionKey would not come back as sent and two
// different keys could become one), while an agent's frames, read through
// DecodeMessage, keep theirs for the cleaning of docs/protocol.md §20.
func (r *Reader) ReadMessage(v any) error {
	frame, err := r.ReadFrame()
	if err != nil {
		return err
	}
	if !utf8.Valid(frame) {
		return bad(Malformed, "a frame must be valid UTF-8")
	}
	return DecodeMessage(frame, v)
}

// DecodeMessage checks that frame (as ReadFrame returns it) is one JSON-RPC
// 2.0 message (CheckMessage) and unmarshals it into v; a bad frame is
// reported as a *FrameError.
func DecodeMessage(frame []byte, v any) error {
	if err := CheckMessage(frame); err != nil {
		return err
	}
	if err := json.Unmarshal(frame, v); err != nil {
		return &FrameError{Kind: Invalid, Reason: "invalid JSON-RPC message"}
	}
	return nil
}

// ReadFrame returns the next non-empty frame with surrounding white space
// trimmed; empty frames (blank lines, LSP bodies of white space) are
// skipped. An oversized frame or an LSP header block without a valid
// Content-Length is reported as a *FrameError after which reading may go
// on; any other error ends the stream: io.EOF at a clean end of input
// (including a final oversized line that has no terminator), else the read
// error (io.ErrUnexpectedEOF or io.EOF for a truncated LSP body). The
// returned slice is the caller's.
func (r *Reader) ReadFrame() ([]byte, error) {
	_, frame, err := r.ReadFrameTo(nil)
	return frame, err
}

// ReadFrameTo is ReadFrame placing the frame in buf's spare capacity: an
// NDJSON line that fits there is copied to buf[len(buf):], and it returns
// buf extended by the line (terminator included) and the frame, a subslice
// of it, so that a forwarder reading many lines into one reused buffer
// allocates nothing per line. A frame that does not fit, or an LSP body,
// gets an allocation of its own and buf comes back unchanged. Errors are
// ReadFrame's (buf then unchanged).
func (r *Reader) ReadFrameTo(buf []byte) (out, frame []byte, err error) {
	for {
		var line []byte
		inBuf := false
		if r.framing == LSP {
			line, err = r.readLSP()
		} else {
			line, inBuf, err = r.readLine(buf)
		}
		if err != nil {
			return buf, nil, err
		}
		if inBuf {
			buf = buf[:len(buf)+len(line)]
		}
		if frame = bytes.TrimSpace(line); len(frame) > 0 {
			return buf, frame, nil
		}
	}
}

func (r *Reader) oversized(length int) *FrameError {
	reason := "frame exceeds " + strconv.Itoa(r.maxBytes) + " bytes"
	if length > 0 {
		reason += " (Content-Length " + strconv.Itoa(length) + "); its body is being discarded"
	}
	return &FrameError{Kind: Oversized, Reason: reason, Limit: r.maxBytes, Length: length}
}

// readLine reads one NDJSON line. A line longer than the buffer is held
// as a list of buffer-sized copies, joined once it ends: nothing is
// reallocated while it grows, so a line over the limit never holds more
// than the limit (plus one buffer) before it is dropped and the rest of it
// is skipped unstored; the dropped bytes are handed back to the runtime at
// once (runtime.GC), so a peer that sends one over-limit line after
// another reuses them instead of growing the heap (docs/protocol.md §20:
// memory is bounded by the caps). A line that fits dst's spare capacity is
// copied there (dst[len(dst):]; inDst is then true), else into an
// allocation of its own.
func (r *Reader) readLine(dst []byte) (line []byte, inDst bool, err error) {
	var parts [][]byte // the line's earlier buffers, copied
	size := 0
	tooLarge := false // once set, the rest of the line is skipped unstored
	for {
		chunk, err := r.r.ReadSlice('\n')
		if !tooLarge {
			size += len(chunk)
			// +2 leaves room for the "\r\n" terminator, checked below.
			if size > r.maxBytes+2 {
				tooLarge = true
				if parts != nil {
					parts = nil
					runtime.GC()
				}
			} else if errors.Is(err, bufio.ErrBufferFull) {
				parts = append(parts, append([]byte(nil), chunk...))
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && (!errors.Is(err, io.EOF) || size == 0 || tooLarge):
			return nil, false, err
		}
		if tooLarge {
			return nil, false, r.oversized(0)
		}
		var buf []byte
		if inDst = cap(dst)-len(dst) >= size; inDst {
			buf = dst[len(dst):len(dst):cap(dst)]
		} else {
			buf = make([]byte, 0, size)
		}
		for _, p := range parts {
			buf = append(buf, p...)
		}
		buf = append(buf, chunk...)
		if len(buf) > r.maxBytes && len(trimEOL(buf)) > r.maxBytes {
			return nil, false, r.oversized(0)
		}
		return buf, inDst, nil
	}
}

// trimEOL is b without its trailing CR and LF bytes (bytes.TrimRight(b,
// "\r\n") without building a cutset per line).
func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func (r *Reader) readLSP() ([]byte, error) {
	if r.skip > 0 {
		// The body of the oversized frame reported by the previous read.
		n := r.skip
		r.skip = 0
		if _, err := io.CopyN(io.Discard, r.r, n); err != nil {
			return nil, err
		}
	}
	length := -1
	sawHeader := false
	for {
		line, err := r.r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		// Resync after a frame we could not delimit: its body may be glued
		// to the next header ("{…}Content-Length: 40").
		if i := strings.Index(line, "Content-Length:"); i > 0 {
			line = line[i:]
		}
		if line == "" {
			if length < 0 && !sawHeader {
				continue // stray blank line between frames
			}
			break
		}
		sawHeader = true
		name, value, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			n, err := strconv.Atoi(strings.TrimSpace(value))
			if err == nil && n >= 0 {
				length = n
			}
		}
	}
	if length < 0 {
		return nil, &FrameError{Kind: NoLength, Reason: "frame header without a valid Content-Length"}
	}
	if length > r.maxBytes {
		// Report first, discard on the next read: a peer that declared
		// more bytes than it sends would otherwise never hear why its next
		// frames are swallowed.
		r.skip = int64(length)
		return nil, r.oversized(length)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r.r, body); err != nil {
		return nil, err
	}
	return body, nil
}
