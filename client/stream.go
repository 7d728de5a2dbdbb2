package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"sync"
	"sync/atomic"
)

// lineStream is the connection's jsonrpc2.ObjectStream in the sidecar's
// default framing (docs/protocol.md §3): one JSON-RPC message per line,
// ended by "\n". Blank lines, and lines that are not a JSON-RPC message at
// all, are skipped (the sidecar writes neither).
//
// Reading has a fast path (docs/architecture.md, "Host clients"): the
// sidecar's session/update notifications, nearly every frame of a turn,
// are handed to updates (the Client's router) as they are read and never
// reach jsonrpc2, which would decode each twice through reflection and
// run its handler; every other frame is decoded for jsonrpc2 as before.
// Before ReadObject returns such a frame, and before it waits for more
// bytes, it calls flush, so each update reaches its consumer before any
// frame read after it and without waiting for the next read.
//
// jsonrpc2.VSCodeObjectCodec would be LSP framing; jsonrpc2.PlainObjectCodec
// writes newline-ended JSON too but reads a bare JSON value stream, so one
// bad line would end the connection.
type lineStream struct {
	conn io.Closer
	tap  func(Frame) // Options.OnFrame, or nil
	// limit (0: none yet) is the sidecar's frame limit, initialize
	// capabilities.maxFrameBytes.
	limit *atomic.Int64

	wmu sync.Mutex // serializes writes: taps see the wire order
	w   *bufio.Writer

	r    *bufio.Reader
	long []byte // a line longer than r's buffer, assembled
	// updates takes a line that is a session/update notification and
	// returns true; it returns false, having kept nothing, for any other
	// line. flush delivers what updates took. Both run on the read loop
	// only (nil: no fast path).
	updates func(line []byte) bool
	flush   func()
}

// readBufferSize is the read buffer: one read(2) takes up to this much of
// the sidecar's stdout (about 300 ordinary updates).
const readBufferSize = 64 << 10

func newLineStream(rw io.ReadWriteCloser, tap func(Frame), limit *atomic.Int64) *lineStream {
	return &lineStream{conn: rw, tap: tap, limit: limit, w: bufio.NewWriter(rw), r: bufio.NewReaderSize(rw, readBufferSize)}
}

// rawFrame is written verbatim (WriteRaw), without a line end added.
type rawFrame []byte

// WriteObject implements jsonrpc2.ObjectStream: one line per message,
// written and flushed under the write lock, so taps see the wire order. A
// message longer than limit (the message bytes without the line end, as
// the sidecar counts them, docs/protocol.md §3 Frame limit) is neither
// written nor tapped: the error is a *frameTooLarge.
func (s *lineStream) WriteObject(obj any) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if raw, ok := obj.(rawFrame); ok {
		if s.tap != nil {
			s.tap(Frame{Sent: true, Raw: true, Data: bytes.Clone(raw)})
		}
		if _, err := s.w.Write(raw); err != nil {
			return err
		}
		return s.w.Flush()
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if s.limit != nil {
		if n := s.limit.Load(); n > 0 && int64(len(b)) > n {
			return &frameTooLarge{size: int64(len(b)), limit: n}
		}
	}
	if s.tap != nil {
		s.tap(Frame{Sent: true, Data: bytes.Clone(b)})
	}
	if _, err := s.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return s.w.Flush()
}

// ReadObject implements jsonrpc2.ObjectStream: the next non-blank line that
// is not a session/update (those go to updates) and decodes as a JSON-RPC
// message. A line that does not (for example an error response with id
// null, which jsonrpc2 cannot represent) is tapped and skipped, so it
// never ends the connection.
func (s *lineStream) ReadObject(v any) error {
	for {
		if s.flush != nil && !s.lineBuffered() {
			s.flush() // the next read may block
		}
		line, err := s.readLine()
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			if s.tap != nil {
				s.tap(Frame{Data: bytes.Clone(line)})
			}
			if s.updates != nil && s.updates(line) {
				continue
			}
			if s.flush != nil {
				s.flush()
			}
			// Decode into a fresh value so that a failed decode leaves v
			// untouched.
			fresh := reflect.New(reflect.TypeOf(v).Elem())
			if json.Valid(line) && json.Unmarshal(line, fresh.Interface()) == nil {
				reflect.ValueOf(v).Elem().Set(fresh.Elem())
				return nil
			}
		}
		if err != nil {
			if s.flush != nil {
				s.flush()
			}
			if errors.Is(err, io.EOF) && len(line) > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
}

// lineBuffered reports whether a whole line is already in the read buffer.
func (s *lineStream) lineBuffered() bool {
	n := s.r.Buffered()
	if n == 0 {
		return false
	}
	b, _ := s.r.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}

// readLine returns the next line with its "\n" (without it at the end of
// the stream). The slice is valid until the next read.
func (s *lineStream) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	s.long = append(s.long[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = s.r.ReadSlice('\n')
		s.long = append(s.long, line...)
	}
	long := s.long
	if cap(s.long) > 4*readBufferSize {
		s.long = nil // do not keep a huge frame's buffer
	}
	return long, err
}

// Close implements jsonrpc2.ObjectStream.
func (s *lineStream) Close() error { return s.conn.Close() }
