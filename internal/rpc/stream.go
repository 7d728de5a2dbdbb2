// Package rpc is the host side of acpx-sidecar: the JSON-RPC 2.0
// connection (sourcegraph/jsonrpc2) over frames read and written by
// internal/jsonl (NDJSON and LSP Content-Length), the answers to bad frames,
// the method table with parameter validation and error mapping, the
// lifecycle (initialize → shutdown → exit, docs/protocol.md §4),
// notifications, host requests (session/requestPermission) and
// $/cancelRequest.
package rpc

import (
	"encoding/json"
	"errors"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Framing names a wire framing: "ndjson" (one message per line) or "lsp"
// (Content-Length headers). It is jsonl.Framing.
type Framing = jsonl.Framing

// Supported framings (docs/protocol.md §3).
const (
	FramingNDJSON Framing = jsonl.NDJSON
	FramingLSP    Framing = jsonl.LSP
)

// DefaultMaxFrameBytes bounds one inbound frame (--max-frame-bytes):
// jsonl.DefaultMaxFrameBytes, 16 MiB (docs/protocol.md §3).
const DefaultMaxFrameBytes = jsonl.DefaultMaxFrameBytes

// codeDrop is the code OnBadFrame reports for a frame discarded without an
// answer (a response with id null).
const codeDrop = 1

// FrameStream is a jsonrpc2.ObjectStream over a byte stream that never
// ends the connection because of one bad frame: a malformed, oversized,
// batched or otherwise invalid frame (a *jsonl.FrameError) is answered with
// a JSON-RPC error with id null, written through the same serialized
// writer, discarded, and reading goes on (docs/protocol.md §3, "Bad
// frames"; the hazard of jsonrpc2's plain codec: docs/architecture.md,
// Host side).
type FrameStream struct {
	in     *jsonl.Reader
	out    *jsonl.Writer
	closer io.Closer

	// OnBadFrame, if set, is called (without frame content) for every
	// discarded frame with the JSON-RPC code it was answered with (1 when
	// it was not answered) and the reason; used for logging.
	OnBadFrame func(code int, reason string)
	// OnEOF, if set, is called once when the input ends; ReadObject then
	// holds the end back until Release (or Close), so the connection can
	// still write replies while the owner shuts down (docs/protocol.md §4
	// Lifecycle, item 5).
	OnEOF func()

	releaseOnce sync.Once
	release     chan struct{}

	// params are the params of the last message read, as the frame holds
	// them (nil when it has none): jsonrpc2 re-encodes a request's params
	// through a map, which sorts members and rewrites escapes, and what
	// the host sends to an agent verbatim (mcpServers, prompt blocks,
	// _meta, extension params) must keep its bytes (docs/protocol.md §23).
	// Written and read only by the connection's read loop (Handle runs
	// in it).
	params json.RawMessage
}

// readMessage is jsonl.Reader.ReadMessage that also keeps the frame's
// params (FrameStream.params).
func (s *FrameStream) readMessage(v any) error {
	s.params = nil
	frame, err := s.in.ReadFrame()
	if err != nil {
		return err
	}
	if !utf8.Valid(frame) {
		return &jsonl.FrameError{Kind: jsonl.Malformed, Reason: "a frame must be valid UTF-8"}
	}
	if err := jsonl.DecodeMessage(frame, v); err != nil {
		return err
	}
	var p struct {
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(frame, &p) == nil && len(p.Params) > 0 {
		s.params = p.Params
	}
	return nil
}

// LastParams returns the params of the message being handled as the host
// wrote them (nil: none). Only the read loop may call it.
func (s *FrameStream) LastParams() json.RawMessage { return s.params }

// NewFrameStream returns a FrameStream reading r and writing w. maxBytes
// bounds one inbound frame (bytes; ≤ 0 means DefaultMaxFrameBytes). closer
// (may be nil) is closed by Close.
func NewFrameStream(r io.Reader, w io.Writer, closer io.Closer, framing Framing, maxBytes int) *FrameStream {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFrameBytes
	}
	return &FrameStream{in: jsonl.NewReader(r, framing, maxBytes), out: jsonl.NewWriter(w, framing), closer: closer,
		release: make(chan struct{})}
}

// Framing returns the stream's framing.
func (s *FrameStream) Framing() Framing { return s.in.Framing() }

// MaxFrameBytes returns the inbound frame limit in bytes.
func (s *FrameStream) MaxFrameBytes() int { return s.in.MaxBytes() }

// WriteObject marshals obj and writes it as one frame. Writes are
// serialized; a frame is never interleaved with another.
func (s *FrameStream) WriteObject(obj interface{}) error { return s.out.WriteObject(obj) }

// WriteNotification writes the notification method with params verbatim
// as one frame (jsonl.Writer.WriteNotification), serialized with every
// other write of the stream.
func (s *FrameStream) WriteNotification(method string, params []byte) error {
	return s.out.WriteNotification(method, params)
}

// WriteNotifications writes ns in order as consecutive frames
// (jsonl.Writer.WriteNotifications: one write for a batch under 1 MiB),
// serialized with every other write of the stream, so no response is
// written between them.
func (s *FrameStream) WriteNotifications(ns []jsonl.Notification) error {
	return s.out.WriteNotifications(ns)
}

// Release lets a ReadObject held at end of input return.
func (s *FrameStream) Release() { s.releaseOnce.Do(func() { close(s.release) }) }

// Close releases a held end of input and closes the underlying closer, if
// any.
func (s *FrameStream) Close() error {
	s.Release()
	if s.closer != nil {
		return s.closer.Close()
	}
	return nil
}

// ReadObject reads frames until one is a valid JSON-RPC 2.0 message and
// unmarshals it into v. Invalid frames are answered and skipped. It
// returns io.EOF (or the read error) when the input ends.
func (s *FrameStream) ReadObject(v interface{}) error {
	for {
		err := s.readMessage(v)
		if err == nil {
			return nil
		}
		var fe *jsonl.FrameError
		if errors.As(err, &fe) {
			s.reject(fe)
			continue
		}
		if s.OnEOF != nil {
			s.OnEOF()
			<-s.release
		}
		return err
	}
}

// reject answers a discarded frame with id null (docs/protocol.md §3),
// except a response with id null, which is never answered.
func (s *FrameStream) reject(fe *jsonl.FrameError) {
	code, dataCode := protocol.CodeInvalidRequest, protocol.ErrInvalidRequest
	switch fe.Kind {
	case jsonl.NullResponse:
		if s.OnBadFrame != nil {
			s.OnBadFrame(codeDrop, fe.Reason)
		}
		return
	case jsonl.Malformed:
		code, dataCode = protocol.CodeParseError, protocol.ErrParse
	}
	if s.OnBadFrame != nil {
		s.OnBadFrame(code, fe.Reason)
	}
	resp := struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   any    `json:"error"`
	}{"2.0", nil, map[string]any{"code": code, "message": fe.Reason,
		"data": protocol.ErrorData{Code: dataCode}}}
	b, _ := json.Marshal(resp)
	_ = s.out.WriteFrame(b)
}
