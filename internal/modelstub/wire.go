package modelstub

// Wire helpers shared by the four APIs: request bodies in, JSON and
// server-sent events out.

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// writeJSON answers 200 with v as an application/json body.
func (s *Stub) writeJSON(w http.ResponseWriter, n int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(append(mustJSON(v), '\n')); err != nil {
		s.logf("modelstub: #%d write: %v", n, err)
	}
}

// sseEvent is one server-sent event: `event: typ` (omitted when typ is
// empty), `data: data`, a blank line.
type sseEvent struct {
	typ  string
	data []byte
}

// writeSSE answers 200 with evs as a text/event-stream, flushing after
// each event.
func (s *Stub) writeSSE(w http.ResponseWriter, n int, evs []sseEvent) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for _, ev := range evs {
		var err error
		if ev.typ != "" {
			_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.typ, ev.data)
		} else {
			_, err = fmt.Fprintf(w, "data: %s\n\n", ev.data)
		}
		if err != nil {
			s.logf("modelstub: #%d write: %v", n, err)
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// mustJSON marshals values built by this package (maps, slices and plain
// values), which cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// commandArgs is the JSON object of the Anthropic, Gemini and chat tool
// call arguments: {"command": cmd, "description": CommandDescription}.
func commandArgs(cmd string) map[string]string {
	return map[string]string{"command": cmd, "description": CommandDescription}
}

// readBody reads the request body, undoing a gzip Content-Encoding.
func readBody(r *http.Request) ([]byte, error) {
	var rd io.Reader = io.LimitReader(r.Body, maxBody+1)
	switch enc := strings.ToLower(r.Header.Get("Content-Encoding")); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer zr.Close()
		rd = io.LimitReader(zr, maxBody+1)
	default:
		return nil, fmt.Errorf("unsupported content-encoding %q", enc)
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if len(b) > maxBody {
		return nil, errors.New("body over 32 MiB")
	}
	return b, nil
}
