package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
)

// ndjsonCodec is the sidecar's default framing (docs/protocol.md §3): one
// JSON-RPC message per line, ended by "\n". Blank lines, and lines that are
// not a JSON-RPC message at all, are skipped (the sidecar writes neither).
// jsonrpc2.VSCodeObjectCodec would be LSP framing; jsonrpc2.PlainObjectCodec
// writes newline-ended JSON too but reads a bare JSON value stream, so one
// bad line would end the connection. tap (may be nil) is Options.OnFrame;
// limit (nil or 0: none yet) is the sidecar's frame limit, initialize
// capabilities.maxFrameBytes.
type ndjsonCodec struct {
	tap   func(Frame)
	limit *atomic.Int64
}

// rawFrame is written verbatim (WriteRaw), without a line end added.
type rawFrame []byte

// WriteObject implements jsonrpc2.ObjectCodec: one line per message. The
// stream calls it under its write lock, so taps see the wire order. A
// message longer than limit (the message bytes without the line end, as
// the sidecar counts them, docs/protocol.md §3 Frame limit) is neither
// written nor tapped: the error is a *frameTooLarge.
func (c ndjsonCodec) WriteObject(w io.Writer, obj any) error {
	if raw, ok := obj.(rawFrame); ok {
		if c.tap != nil {
			c.tap(Frame{Sent: true, Raw: true, Data: bytes.Clone(raw)})
		}
		_, err := w.Write(raw)
		return err
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if c.limit != nil {
		if n := c.limit.Load(); n > 0 && int64(len(b)) > n {
			return &frameTooLarge{size: int64(len(b)), limit: n}
		}
	}
	if c.tap != nil {
		c.tap(Frame{Sent: true, Data: bytes.Clone(b)})
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadObject implements jsonrpc2.ObjectCodec: the next non-blank line that
// decodes as a JSON-RPC message. A line that does not (for example an
// error response with id null, which jsonrpc2 cannot represent) is tapped
// and skipped, so it never ends the connection.
func (c ndjsonCodec) ReadObject(r *bufio.Reader, v any) error {
	for {
		line, err := r.ReadBytes('\n')
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			if c.tap != nil {
				c.tap(Frame{Data: bytes.Clone(line)})
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
			if errors.Is(err, io.EOF) && len(line) > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
}

// pipes is the host end of the sidecar's stdio: reads come from its
// stdout, writes go to its stdin. Close closes both, once.
type pipes struct {
	r      *os.File
	w      *os.File
	once   sync.Once
	inOnce sync.Once
}

func (p *pipes) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipes) Write(b []byte) (int, error) { return p.w.Write(b) }

// Close implements io.Closer.
func (p *pipes) Close() error {
	p.once.Do(func() { _ = p.closeInput(); _ = p.r.Close() })
	return nil
}

// closeInput closes the sidecar's stdin only, once.
func (p *pipes) closeInput() error {
	var err error
	p.inOnce.Do(func() { err = p.w.Close() })
	return err
}

// queue runs funcs one at a time, in the order they were pushed, on its own
// goroutine; push never blocks, so the read loop never waits on a slow
// callback.
type queue struct {
	mu     sync.Mutex
	items  []func()
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

func newQueue() *queue {
	q := &queue{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

func (q *queue) push(f func()) {
	q.mu.Lock()
	if !q.closed {
		q.items = append(q.items, f)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close lets the queue finish what it holds, then stop; wait on q.done.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		items, closed := q.items, q.closed
		q.items = nil
		q.mu.Unlock()
		for _, f := range items {
			f()
		}
		if len(items) == 0 {
			if closed {
				return
			}
			<-q.wake
		}
	}
}

// turnSink collects one turn's updates for Prompt, which delivers them on
// the caller's goroutine.
type turnSink struct {
	mu   sync.Mutex
	ups  []Update
	wake chan struct{}
}

func (s *turnSink) push(u Update) {
	s.mu.Lock()
	s.ups = append(s.ups, u)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *turnSink) take() []Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	ups := s.ups
	s.ups = nil
	return ups
}
