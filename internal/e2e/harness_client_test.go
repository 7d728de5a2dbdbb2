package e2e

// The harness's side of package client: the frame tap that records and
// validates what the sidecar writes, the answers to sidecar requests, and
// the writes tests make (harness_test.go).

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/wirecheck"
)

// procHandle is what tests use of the sidecar process.
type procHandle struct{ Process *os.Process }

// stdinPipe is the sidecar's stdin as tests see it, through the client.
type stdinPipe struct{ c *client.Client }

func (p stdinPipe) Write(b []byte) (int, error) {
	if err := p.c.WriteRaw(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (p stdinPipe) Close() error { return p.c.CloseInput() }

// watch records the exit once the client has read everything.
func (s *sidecar) watch() {
	<-s.c.Done()
	var err error
	if ps := s.c.ProcessState(); ps != nil && !ps.Success() {
		err = &exec.ExitError{ProcessState: ps}
	}
	s.mu.Lock()
	s.exitErr = err
	s.eof = true
	s.cond.Broadcast()
	s.mu.Unlock()
	close(s.exited)
}

// tap is the client's frame tap: it validates each frame and records what
// the sidecar wrote.
func (s *sidecar) tap(f client.Frame) {
	if f.Sent {
		data := f.Data
		if !f.Raw {
			data = append(data, '\n')
		}
		for _, err := range s.wire.Feed(wirecheck.FromHost, data) {
			if !s.hostUnchecked.Load() {
				s.t.Error(err)
			}
		}
		return
	}
	line := f.Data
	fr := &frame{}
	if err := json.Unmarshal(line, fr); err != nil {
		s.t.Errorf("sidecar wrote a non-JSON stdout line: %q", truncate(string(line), 200))
	} else if verr := s.wire.Check(wirecheck.FromSidecar, line); verr != nil {
		s.t.Error(verr)
	}
	s.mu.Lock()
	s.raw = append(s.raw, append(line, '\n'))
	switch {
	case fr.Method != "" && len(fr.ID) > 0:
		// A sidecar request: the client hands it to serve.
	case fr.Method != "":
		s.notes = append(s.notes, fr)
	default:
		s.replies[string(fr.ID)] = fr
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

// serve answers a sidecar request (Options.OnRequest): through onRequest,
// else cancelled; when onRequest returns nil, with what the test sends.
func (s *sidecar) serve(ctx context.Context, req client.Request) (any, error) {
	f := &frame{ID: req.ID, Method: req.Method, Params: req.Params}
	key := string(req.ID)
	ch := make(chan map[string]json.RawMessage, 1)
	s.mu.Lock()
	s.later[key] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.later, key)
		s.mu.Unlock()
	}()
	var result any = map[string]string{"outcome": "cancelled"}
	if s.onRequest != nil {
		result = s.onRequest(f)
	}
	if result != nil {
		return result, nil
	}
	select {
	case msg := <-ch:
		if raw, ok := msg["error"]; ok {
			var e struct {
				Code    int             `json:"code"`
				Message string          `json:"message"`
				Data    json.RawMessage `json:"data"`
			}
			_ = json.Unmarshal(raw, &e)
			return nil, &client.Error{Code: e.Code, Message: e.Message, Data: e.Data}
		}
		return msg["result"], nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// send writes one message: a notification through the client; an answer
// to a sidecar request the test holds, as the client's answer; anything
// else (requests with test-chosen ids, stray answers) verbatim.
func (s *sidecar) send(msg any) {
	b, err := json.Marshal(msg)
	if err != nil {
		s.t.Fatal(err)
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	id, hasID := m["id"]
	method, hasMethod := m["method"]
	switch {
	case hasMethod && !hasID:
		var name string
		_ = json.Unmarshal(method, &name)
		var params any
		if p, ok := m["params"]; ok {
			params = p
		}
		if err := s.c.Notify(context.Background(), name, params); err != nil {
			s.t.Errorf("notify %s: %v", name, err)
		}
		return
	case hasID && !hasMethod:
		s.mu.Lock()
		ch := s.later[string(id)]
		delete(s.later, string(id))
		s.mu.Unlock()
		if ch != nil {
			ch <- m
			return
		}
	}
	s.sendRaw(append(b, '\n'))
}

func (s *sidecar) sendRaw(b []byte) {
	if err := s.c.WriteRaw(b); err != nil {
		s.t.Errorf("write to sidecar: %v", err)
	}
}
