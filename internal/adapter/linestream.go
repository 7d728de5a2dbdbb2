package adapter

import (
	"errors"
	"io"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
)

// lineStream is the jsonrpc2.ObjectStream over one provider's stdio: NDJSON
// frames read and written by internal/jsonl. A bad frame (an agent's log
// line on stdout, a line over the limit, anything that is not one JSON-RPC
// 2.0 message) is dropped: never answered, never fatal, and reported to
// onDrop only by its *jsonl.FrameError, which carries no line content.
type lineStream struct {
	in     *jsonl.Reader
	out    *jsonl.Writer
	closer io.Closer
	onDrop func(*jsonl.FrameError) // may be nil
}

// newLineStream reads r and writes w as NDJSON; maxLine bounds one inbound
// line in bytes (≤ 0 means jsonl.DefaultMaxFrameBytes). closer (may be nil)
// is closed by Close.
func newLineStream(r io.Reader, w io.Writer, closer io.Closer, maxLine int, onDrop func(*jsonl.FrameError)) *lineStream {
	return &lineStream{in: jsonl.NewReader(r, jsonl.NDJSON, maxLine), out: jsonl.NewWriter(w, jsonl.NDJSON),
		closer: closer, onDrop: onDrop}
}

// ReadObject reads lines until one is a JSON-RPC 2.0 message and unmarshals
// it into v, dropping bad lines. It returns the read error (io.EOF) when
// the provider's stdout ends.
func (s *lineStream) ReadObject(v interface{}) error {
	for {
		err := s.in.ReadMessage(v)
		if err == nil {
			return nil
		}
		var fe *jsonl.FrameError
		if !errors.As(err, &fe) {
			return err
		}
		if s.onDrop != nil {
			s.onDrop(fe)
		}
	}
}

// WriteObject writes v as one line; writes are serialized.
func (s *lineStream) WriteObject(v interface{}) error { return s.out.WriteObject(v) }

// Close closes the closer, if any.
func (s *lineStream) Close() error {
	if s.closer != nil {
		return s.closer.Close()
	}
	return nil
}
