package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// TestGoClient_ExtensionsAndAgentSessions: package client's OnExtRequest,
// OnExtNotification, Session.ExtRequest, ExtNotify and AgentSessions and
// OpenParams.AgentSessionID against the fault agent (docs/protocol.md §23),
// every frame validated against the schema.
func TestGoClient_ExtensionsAndAgentSessions(t *testing.T) {
	mark := testmark.New()
	killMarkedOnCleanup(t, mark)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var notes []client.ExtNotification
	var asked []client.ExtRequest
	c, err := client.Start(ctx, client.Options{
		Binary: sidecarBin, StateDir: t.TempDir(), OnFrame: clientSchemaTap(t),
		OnExtRequest: func(_ context.Context, req client.ExtRequest) (json.RawMessage, error) {
			mu.Lock()
			asked = append(asked, req)
			n := len(asked)
			mu.Unlock()
			if n > 1 {
				return nil, &client.Error{Code: -32077, Message: "go host refuses", Data: json.RawMessage(`{"n":2}`)}
			}
			return json.RawMessage(`{"from":"go"}`), nil
		},
		OnExtNotification: func(n client.ExtNotification) {
			mu.Lock()
			notes = append(notes, n)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	trackChild(c.Process().Pid)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		_ = c.Close(cctx)
	})
	agentState := agentWritableDir(t)
	params := func(key string) client.OpenParams {
		return client.OpenParams{SessionKey: key, Agent: "generic", Cwd: t.TempDir(), Env: map[string]string{"ACPX_TEST_MARK": mark}, InheritEnv: []string{"HOME"},
			Command: client.Command{Path: faultBin, Args: []string{"--mode", "ext-notify,ext-ask=_fa/ask,caps=list", "--state-dir", agentState}}}
	}
	s, err := c.Open(ctx, params("go-ext"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	backend := s.Result().Identity.BackendSessionID
	waitUntil(t, 20*time.Second, "the agent's _fa/status", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(notes) > 0 && notes[0].Method == "_fa/status" && notes[0].Session == s.ID()
	})

	res, err := s.ExtRequest(ctx, "_fa/echo", map[string]int{"v": 7})
	if err != nil || string(res) != `{"echo":{"v":7}}` {
		t.Errorf("ExtRequest: %s, %v", res, err)
	}
	_, err = s.ExtRequest(ctx, "_fa/fail", nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.DataCode != "AGENT_ERROR" || !strings.Contains(string(ce.Data), `"agentError":{"code":-32042`) {
		t.Errorf("ExtRequest _fa/fail: %v (data %s), want AGENT_ERROR with the agent's error", err, dataOf(ce))
	}
	if _, err = s.ExtRequest(ctx, "session/prompt", nil); !errors.As(err, &ce) || ce.Code != -32602 || ce.Field() != "method" {
		t.Errorf("ExtRequest of a non-extension method: %v, want -32602 field method", err)
	}
	if err := s.ExtNotify(ctx, "_go/hello", map[string]bool{"ok": true}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "the agent's _fa/seen", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range notes {
			if n.Method == "_fa/seen" && strings.Contains(string(n.Params), `"_go/hello"`) {
				return true
			}
		}
		return false
	})

	var chunks []string
	collect := func(u client.Update) {
		var h struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if u.Kind() == "agent_message_chunk" && json.Unmarshal(u.Update, &h) == nil {
			chunks = append(chunks, h.Content.Text)
		}
	}
	for _, rid := range []string{"t1", "t2"} {
		if _, err := s.Prompt(ctx, client.PromptParams{RequestID: rid, Prompt: "go", Meta: json.RawMessage(`{"trace":"` + rid + `"}`)}, collect); err != nil {
			t.Fatalf("Prompt %s: %v", rid, err)
		}
	}
	joined := strings.Join(chunks, "\n")
	if !strings.Contains(joined, `ext: result {"from":"go"}`) || !strings.Contains(joined, `ext: error -32077 go host refuses {"n":2}`) {
		t.Errorf("the agent's reports %q, want the Go host's result and error", chunks)
	}
	mu.Lock()
	if len(asked) != 2 || asked[0].RequestID != "t1" || asked[0].Method != "_fa/ask" || asked[0].Session != s.ID() {
		t.Errorf("OnExtRequest got %+v", asked)
	}
	mu.Unlock()

	page, err := s.AgentSessions(ctx, "", "")
	if err != nil || len(page.Sessions) != 1 || page.NextCursor != "" || !strings.Contains(string(page.Sessions[0]), backend) {
		t.Fatalf("AgentSessions: %+v, %v", page, err)
	}
	p := params("go-ext-resume")
	p.AgentSessionID = backend
	s2, err := c.Open(ctx, p)
	if err != nil || !s2.Result().Resumed || s2.Result().Identity.BackendSessionID != backend {
		t.Fatalf("Open with AgentSessionID: %v %+v", err, s2)
	}
	if _, err := c.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	waitNoMarked(t, mark, "", 10*time.Second)
}

func dataOf(e *client.Error) string {
	if e == nil {
		return ""
	}
	return string(e.Data)
}

// waitUntil polls cond (bounded) and fails the test when it never holds.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a callback's result, bounded
	}
}
