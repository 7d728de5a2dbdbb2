package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// wireMsg is one JSON-RPC 2.0 message as it crosses the pipe
// (docs/protocol.md §3):
// a request (method + id), a notification (method, no id) or a response
// (id + result or error).
type wireMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error object; data carries the sidecar's stable
// string code (docs/protocol.md §5).
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    struct {
		Code      string          `json:"code"`
		Retryable bool            `json:"retryable"`
		Field     string          `json:"field"`
		Proof     json.RawMessage `json:"proof"`
		Cleanup   json.RawMessage `json:"cleanup"`
	} `json:"data"`
}

func (e *rpcError) Error() string {
	s := fmt.Sprintf("sidecar error %d", e.Code)
	if e.Data.Code != "" {
		s += " " + e.Data.Code
	}
	s += ": " + e.Message
	if e.Data.Field != "" {
		s += " (field " + e.Data.Field + ")"
	}
	return s
}

// client is a tiny NDJSON JSON-RPC 2.0 client: call writes one request line
// and waits for the response with the same id; one reader goroutine
// dispatches responses by id and hands every notification to onNotify, in
// the order they arrive on the wire.
type client struct {
	w       io.Writer
	timeout time.Duration // per call

	onNotify  func(method string, params json.RawMessage)
	onRequest func(method string) // told about a request the sidecar sent us

	wmu sync.Mutex // serialises writes: one frame per line

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan wireMsg

	done    chan struct{} // closed when the reader stops
	readErr error         // why the reader stopped; read after done
}

func newClient(r io.Reader, w io.Writer, timeout time.Duration,
	onNotify func(string, json.RawMessage), onRequest func(string)) *client {
	c := &client{
		w: w, timeout: timeout, onNotify: onNotify, onRequest: onRequest,
		pending: map[int64]chan wireMsg{}, done: make(chan struct{}),
	}
	go c.readLoop(r)
	return c
}

// readLoop runs until the sidecar closes its stdout.
func (c *client) readLoop(r io.Reader) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			c.dispatch(line)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("sidecar closed its stdout")
			}
			c.readErr = err
			close(c.done)
			return
		}
	}
}

func (c *client) dispatch(line []byte) {
	var m wireMsg
	if err := json.Unmarshal(line, &m); err != nil {
		c.onNotify("(unparsable line)", nil)
		return
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case m.Method != "" && hasID:
		// A request from the sidecar (docs/protocol.md §9). We did not declare
		// capabilities.permissionRequests, so none is expected; answer it
		// anyway so the sidecar never waits on us.
		c.onRequest(m.Method)
		_ = c.write(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   map[string]any  `json:"error"`
		}{"2.0", m.ID, map[string]any{"code": -32601, "message": "demohost serves no requests"}})
	case m.Method != "":
		c.onNotify(m.Method, m.Params)
	case hasID:
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		if err != nil {
			return // not one of our ids (we only send numbers)
		}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	default:
		// An error response with id null: a frame the sidecar could not read.
		msg := "(no detail)"
		if m.Error != nil {
			msg = m.Error.Error()
		}
		c.onNotify("(protocol error, id null) "+msg, nil)
	}
}

func (c *client) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(append(b, '\n'))
	return err
}

// call sends method(params) and decodes the result into result (may be
// nil). Errors: the sidecar's JSON-RPC error as *rpcError, a write error,
// the sidecar closing its stdout, or no response within c.timeout.
func (c *client) call(method string, params, result any) error {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan wireMsg, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() { c.mu.Lock(); delete(c.pending, id); c.mu.Unlock() }

	if err := c.write(outMsg{JSONRPC: "2.0", ID: id, Method: method, Params: params}); err != nil {
		forget()
		return fmt.Errorf("%s: writing the request: %w", method, err)
	}
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	var m wireMsg
	select {
	case m = <-ch:
	case <-c.done:
		select {
		case m = <-ch: // answered just before the pipe closed
		default:
			forget()
			return fmt.Errorf("%s: no response: %v", method, c.readErr)
		}
	case <-timer.C:
		forget()
		return fmt.Errorf("%s: TIMEOUT, no response within %v", method, c.timeout)
	}
	if m.Error != nil {
		return fmt.Errorf("%s: %w", method, m.Error)
	}
	if result != nil {
		if err := json.Unmarshal(m.Result, result); err != nil {
			return fmt.Errorf("%s: unexpected result shape: %v", method, err)
		}
	}
	return nil
}

// notify sends a notification (no id, no response).
func (c *client) notify(method string, params any) error {
	return c.write(outMsg{JSONRPC: "2.0", Method: method, Params: params})
}

// outMsg is a request (ID set) or notification (ID nil) we send; nil
// params are left out.
type outMsg struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}
