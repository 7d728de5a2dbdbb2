// Package rpc is the host side of acpx-sidecar: framing codecs (NDJSON and
// LSP Content-Length), the JSON-RPC 2.0 connection (sourcegraph/jsonrpc2),
// the method table with parameter validation and error mapping, the
// lifecycle (initialize → shutdown → exit, PROTOCOL §2), notifications, host
// requests (session/requestPermission) and $/cancelRequest.
package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/acpx-sidecar/acpx-sidecar/internal/protocol"
)

// Framing names a wire framing: "ndjson" (one message per line) or "lsp"
// (Content-Length headers).
type Framing string

// Supported framings (PROTOCOL §1).
const (
	FramingNDJSON Framing = "ndjson"
	FramingLSP    Framing = "lsp"
)

// DefaultMaxFrameBytes bounds one inbound frame: 16 MiB (PROTOCOL §1).
const DefaultMaxFrameBytes = 16 << 20

// FrameStream is a jsonrpc2.ObjectStream over a byte stream that never
// ends the connection because of one bad frame: a malformed, oversized,
// batched or otherwise invalid frame is answered with a JSON-RPC error
// (id null unless the frame's id could be read) written through the same
// serialized writer, discarded, and reading goes on (PROTOCOL §1; the
// hazard of jsonrpc2's plain codec in ARCHITECTURE.md).
type FrameStream struct {
	r        *bufio.Reader
	w        io.Writer
	closer   io.Closer
	framing  Framing
	maxBytes int

	mu sync.Mutex // serializes writes
	// OnBadFrame, if set, is called (without frame content) for every
	// discarded frame; used for logging.
	OnBadFrame func(code int, reason string)
	// Quiet: discard bad frames without answering them (for the provider
	// side, where agents print log lines to stdout).
	Quiet bool
	// OnEOF, if set, is called once when the input ends; ReadObject then
	// holds the end back until Release (or Close), so the connection can
	// still write replies while the owner shuts down (PROTOCOL §2.4).
	OnEOF func()

	releaseOnce sync.Once
	release     chan struct{}
}

// NewFrameStream returns a FrameStream reading r and writing w. maxBytes
// bounds one inbound frame (bytes, > 0). closer (may be nil) is closed by
// Close.
func NewFrameStream(r io.Reader, w io.Writer, closer io.Closer, framing Framing, maxBytes int) *FrameStream {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFrameBytes
	}
	return &FrameStream{r: bufio.NewReaderSize(r, 64<<10), w: w, closer: closer, framing: framing, maxBytes: maxBytes,
		release: make(chan struct{})}
}

// WriteObject marshals obj and writes it as one frame. Writes are
// serialized; a frame is never interleaved with another.
func (s *FrameStream) WriteObject(obj interface{}) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return s.writeFrame(b)
}

func (s *FrameStream) writeFrame(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.framing == FramingLSP {
		if _, err := fmt.Fprintf(s.w, "Content-Length: %d\r\n\r\n", len(b)); err != nil {
			return err
		}
		_, err := s.w.Write(b)
		return err
	}
	buf := make([]byte, 0, len(b)+1)
	buf = append(append(buf, b...), '\n')
	_, err := s.w.Write(buf)
	return err
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

// errDiscarded marks a frame already answered and skipped.
var errDiscarded = errors.New("frame discarded")

// errNoLength marks an LSP header block without Content-Length.
var errNoLength = errors.New("missing Content-Length")

// codeDrop marks a frame discarded without an answer.
const codeDrop = 1

// errTooLarge marks a frame longer than maxBytes (already discarded).
var errTooLarge = errors.New("frame too large")

// ReadObject reads frames until one is a valid JSON-RPC 2.0 message and
// unmarshals it into v. Invalid frames are answered and skipped. It
// returns io.EOF (or the read error) when the input ends.
func (s *FrameStream) ReadObject(v interface{}) error {
	for {
		frame, err := s.readFrame()
		if errors.Is(err, errDiscarded) {
			continue
		}
		if errors.Is(err, errNoLength) {
			s.reject(protocol.CodeInvalidRequest, protocol.ErrInvalidRequest, "frame header without a valid Content-Length")
			continue
		}
		if errors.Is(err, errTooLarge) {
			s.reject(protocol.CodeInvalidRequest, protocol.ErrInvalidRequest,
				"frame exceeds "+strconv.Itoa(s.maxBytes)+" bytes")
			continue
		}
		if err != nil {
			if s.OnEOF != nil {
				s.OnEOF()
				<-s.release
			}
			return err
		}
		frame = bytes.TrimSpace(frame)
		if len(frame) == 0 {
			continue
		}
		if code, dcode, reason := checkMessage(frame); code == codeDrop {
			if s.OnBadFrame != nil {
				s.OnBadFrame(code, reason)
			}
			continue
		} else if code != 0 {
			s.reject(code, dcode, reason)
			continue
		}
		if err := json.Unmarshal(frame, v); err != nil {
			s.reject(protocol.CodeInvalidRequest, protocol.ErrInvalidRequest, "invalid JSON-RPC message")
			continue
		}
		return nil
	}
}

// reject answers a discarded frame with id null (PROTOCOL §1).
func (s *FrameStream) reject(code int, dataCode, reason string) {
	if s.OnBadFrame != nil {
		s.OnBadFrame(code, reason)
	}
	if s.Quiet {
		return
	}
	resp := struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   any    `json:"error"`
	}{"2.0", nil, map[string]any{"code": code, "message": reason,
		"data": protocol.ErrorData{Code: dataCode}}}
	b, _ := json.Marshal(resp)
	_ = s.writeFrame(b)
}

// checkMessage validates the shape of one JSON-RPC 2.0 message. It returns
// code 0 if the frame is acceptable, codeDrop to discard it silently, else
// the error to answer with.
func checkMessage(frame []byte) (code int, dataCode, reason string) {
	if frame[0] == '[' {
		if json.Valid(frame) {
			return protocol.CodeInvalidRequest, protocol.ErrInvalidRequest, "batches are not supported"
		}
		return protocol.CodeParseError, protocol.ErrParse, "malformed JSON"
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(frame, &m); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || !json.Valid(frame) {
			return protocol.CodeParseError, protocol.ErrParse, "malformed JSON"
		}
		return protocol.CodeInvalidRequest, protocol.ErrInvalidRequest, "a message must be a JSON object"
	}
	rawID, hasID := m["id"]
	_, hasResult := m["result"]
	_, hasError := m["error"]
	if hasID && string(rawID) == "null" && (hasResult || hasError) {
		// A response to a frame the peer could not parse: nothing of ours
		// to match it with, and never answered.
		return codeDrop, "", "response with id null"
	}
	if hasID {
		switch {
		case isUintID(rawID), len(rawID) > 0 && rawID[0] == '"':
		default:
			return protocol.CodeInvalidRequest, protocol.ErrInvalidRequest,
				"id must be a string or a non-negative integer"
		}
	}
	if v, ok := m["jsonrpc"]; !ok || string(v) != `"2.0"` {
		return protocol.CodeInvalidRequest, protocol.ErrInvalidRequest, `jsonrpc must be "2.0"`
	}
	method, hasMethod := m["method"]
	switch {
	case hasMethod:
		var name string
		if json.Unmarshal(method, &name) != nil || name == "" {
			return protocol.CodeInvalidRequest, protocol.ErrInvalidRequest, "method must be a non-empty string"
		}
		if hasResult || hasError {
			return protocol.CodeInvalidRequest, protocol.ErrInvalidRequest, "a message cannot be both request and response"
		}
		if p, ok := m["params"]; ok && len(p) > 0 && p[0] != '{' && p[0] != '[' && string(p) != "null" {
			return protocol.CodeInvalidRequest, protocol.ErrInvalidRequest, "params must be an object or array"
		}
	case hasResult || hasError:
		if !hasID {
			return protocol.CodeInvalidRequest, protocol.ErrInvalidRequest, "a response needs an id"
		}
		// Responses are never answered; a bad one is only dropped by the
		// connection. Returning 0 lets jsonrpc2 match it.
	default:
		return protocol.CodeInvalidRequest, protocol.ErrInvalidRequest, "not a request or response"
	}
	return 0, "", ""
}

func isUintID(raw json.RawMessage) bool {
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return false
	}
	// jsonrpc2 v0.2.3 keeps numeric ids in an int64.
	_, err := strconv.ParseInt(string(raw), 10, 64)
	return err == nil
}

// readFrame returns the next frame's bytes.
func (s *FrameStream) readFrame() ([]byte, error) {
	if s.framing == FramingLSP {
		return s.readLSP()
	}
	return s.readLine()
}

func (s *FrameStream) readLine() ([]byte, error) {
	var buf []byte
	tooLarge := false // once set, the rest of the line is skipped unstored
	for {
		chunk, err := s.r.ReadSlice('\n')
		if !tooLarge {
			buf = append(buf, chunk...)
			// +2 leaves room for the "\r\n" terminator, checked below.
			if len(buf) > s.maxBytes+2 {
				tooLarge, buf = true, nil
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && (!errors.Is(err, io.EOF) || len(buf) == 0 || tooLarge):
			return nil, err
		}
		if tooLarge || len(bytes.TrimRight(buf, "\r\n")) > s.maxBytes {
			return nil, errTooLarge
		}
		return buf, nil
	}
}

func (s *FrameStream) readLSP() ([]byte, error) {
	length := -1
	sawHeader := false
	for {
		line, err := s.r.ReadString('\n')
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
		return nil, errNoLength
	}
	if length > s.maxBytes {
		// Answer first: a host that declared more bytes than it sends
		// would otherwise never hear why its next requests are swallowed.
		s.reject(protocol.CodeInvalidRequest, protocol.ErrInvalidRequest,
			"frame exceeds "+strconv.Itoa(s.maxBytes)+" bytes (Content-Length "+strconv.Itoa(length)+"); its body is being discarded")
		if _, err := io.CopyN(io.Discard, s.r, int64(length)); err != nil {
			return nil, err
		}
		return nil, errDiscarded
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(s.r, body); err != nil {
		return nil, err
	}
	return body, nil
}
