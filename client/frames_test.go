package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// openFault opens a faultagent session with the given modes on c.
func openFault(ctx context.Context, t *testing.T, c *client.Client, key, mark string, p client.OpenParams, modes ...string) *client.Session {
	t.Helper()
	p.SessionKey, p.Agent, p.Cwd = key, "generic", t.TempDir()
	p.Command = client.Command{Path: faultagentBin}
	if len(modes) > 0 {
		p.Command.Args = []string{"--mode", strings.Join(modes, ",")}
	}
	p.Env = map[string]string{testmark.Env: mark}
	s, err := c.Open(ctx, p)
	if err != nil {
		t.Fatalf("Open %s: %v", key, err)
	}
	return s
}

// wantInvalidRequest fails t unless err is the client's refusal of a frame
// the sidecar would answer with id null: -32600 INVALID_REQUEST, not a
// cancellation (which is what waiting forever for that answer looks like).
func wantInvalidRequest(t *testing.T, what string, err error, msgParts ...string) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != -32600 || ce.DataCode != "INVALID_REQUEST" {
		t.Fatalf("%s: %#v, want -32600 INVALID_REQUEST", what, err)
	}
	for _, p := range msgParts {
		if !strings.Contains(ce.Message, p) {
			t.Errorf("%s: message %q lacks %q", what, ce.Message, p)
		}
	}
}

// TestFrameLimit: a prompt whose frame is over the sidecar's
// --max-frame-bytes is refused by the client at once (the sidecar would
// answer it with id null, docs/protocol.md §3), nothing is written, and the
// session and the connection go on working. The limit is exact: a frame
// of exactly N bytes is sent and answered, N+1 is refused.
func TestFrameLimit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		limit      int
		promptSize int
	}{
		{"4096", []string{"--max-frame-bytes", "4096"}, 4096, 5000},
		{"default", nil, 16 << 20, 16<<20 + 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			mark := testmark.New()
			var mu sync.Mutex
			var sent [][]byte
			c := start(t, client.Options{Args: tc.args, OnFrame: func(f client.Frame) {
				if f.Sent {
					mu.Lock()
					sent = append(sent, f.Data)
					mu.Unlock()
				}
			}})
			if got := c.Info().Capabilities.MaxFrameBytes; got != tc.limit {
				t.Fatalf("maxFrameBytes = %d, want %d", got, tc.limit)
			}
			s := openFault(ctx, t, c, "frame-"+tc.name, mark, client.OpenParams{})
			mu.Lock()
			before := len(sent)
			mu.Unlock()

			// Bounded well below the test's deadline: without the check the
			// call waits for an answer that never comes.
			pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
			_, err := s.Prompt(pctx, client.PromptParams{RequestID: "big", Prompt: strings.Repeat("a", tc.promptSize)}, nil)
			pcancel()
			wantInvalidRequest(t, "Prompt over the frame limit", err, fmt.Sprintf("limit of %d bytes", tc.limit))
			mu.Lock()
			if len(sent) != before {
				t.Errorf("%d frame(s) were sent for the refused prompt", len(sent)-before)
			}
			mu.Unlock()

			res, err := s.Prompt(ctx, client.PromptParams{RequestID: "small", Prompt: "hi"}, nil)
			if err != nil || res.Status != "completed" {
				t.Fatalf("Prompt after the refused one: %+v, %v", res, err)
			}

			if tc.limit == 4096 {
				// Measure a session/list frame with an empty pad, then pad
				// it to exactly the limit (ids stay one digit).
				if err := c.Call(ctx, "session/list", map[string]string{"pad": ""}, nil); err != nil {
					t.Fatalf("session/list: %v", err)
				}
				mu.Lock()
				base := len(sent[len(sent)-1])
				mu.Unlock()
				pad := strings.Repeat("p", tc.limit-base)
				var raw json.RawMessage
				if err := c.Call(ctx, "session/list", map[string]string{"pad": pad}, &raw); err != nil {
					t.Fatalf("session/list in a frame of exactly %d bytes: %v", tc.limit, err)
				}
				mu.Lock()
				if n := len(sent[len(sent)-1]); n != tc.limit {
					t.Errorf("the padded frame was %d bytes, want %d", n, tc.limit)
				}
				mu.Unlock()
				err := c.Call(ctx, "session/list", map[string]string{"pad": pad + "p"}, nil)
				wantInvalidRequest(t, "session/list one byte over the limit", err,
					fmt.Sprintf("%d bytes", tc.limit+1), fmt.Sprintf("limit of %d bytes", tc.limit))
			}

			if _, err := s.Close(ctx, client.CloseParams{}); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if _, err := c.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			assertNoMarkedProcess(t, mark)
		})
	}
}

// TestBadParamsAreRefusedBeforeSending: params that are not an object or
// an array (and an empty method), which the sidecar answers with id null,
// are refused by Call, Send and Notify without sending; an array is sent
// (the sidecar answers it with its own id); nil and null mean no params.
func TestBadParamsAreRefusedBeforeSending(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	sent := 0
	c := start(t, client.Options{OnFrame: func(f client.Frame) {
		if f.Sent {
			mu.Lock()
			sent++
			mu.Unlock()
		}
	}})
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return sent
	}
	before := count()
	for _, tc := range []struct {
		name   string
		method string
		params any
		kind   string
	}{
		{"string", "session/list", "x", "a string"},
		{"raw number", "session/list", json.RawMessage(`42`), "a number"},
		{"bool", "session/list", true, "a boolean"},
		{"empty method", "", map[string]any{}, "method"},
	} {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.Call(cctx, tc.method, tc.params, nil)
		ccancel()
		wantInvalidRequest(t, "Call with "+tc.name, err, tc.kind)
		_, err = c.Send(ctx, tc.method, tc.params)
		wantInvalidRequest(t, "Send with "+tc.name, err, tc.kind)
		wantInvalidRequest(t, "Notify with "+tc.name, c.Notify(ctx, tc.method, tc.params), tc.kind)
	}
	if n := count() - before; n != 0 {
		t.Fatalf("%d frame(s) were sent for refused calls", n)
	}

	var ce *client.Error
	err := c.Call(ctx, "session/list", []int{1}, nil)
	if !errors.As(err, &ce) || ce.Code != -32602 || ce.Field() != "params" {
		t.Fatalf("Call with array params: %#v, want the sidecar's -32602 field params", err)
	}
	var typedNil map[string]any
	for _, p := range []any{nil, typedNil, json.RawMessage(`null`), map[string]any{}} {
		var raw json.RawMessage
		if err := c.Call(ctx, "session/list", p, &raw); err != nil || !strings.Contains(string(raw), `"sessions"`) {
			t.Fatalf("Call with params %#v: %s, %v", p, raw, err)
		}
	}
	if _, err := c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
