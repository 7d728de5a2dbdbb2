package client_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// elicitChunks runs one turn of a fault-agent session in mode modes and
// returns its "elicit…" chunks.
func elicitChunks(t *testing.T, ctx context.Context, c *client.Client, mark, modes string) (*client.Session, []string) {
	t.Helper()
	s, err := c.Open(ctx, client.OpenParams{SessionKey: "client-elicit-" + strings.NewReplacer("=", "-", ",", "-").Replace(modes), Agent: "generic",
		Command: client.Command{Path: faultagentBin, Args: []string{"--mode", modes}}, Cwd: t.TempDir(),
		Env: map[string]string{testmark.Env: mark}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	var out []string
	res, err := s.Prompt(ctx, client.PromptParams{RequestID: "t1", Prompt: "ask"}, func(u client.Update) {
		var chunk struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if u.Kind() == "agent_message_chunk" && json.Unmarshal(u.Update, &chunk) == nil && strings.HasPrefix(chunk.Content.Text, "elicit") {
			out = append(out, chunk.Content.Text)
		}
	})
	if err != nil || res.Status != "completed" {
		t.Fatalf("Prompt: %+v, %v", res, err)
	}
	return s, out
}

// TestElicitation_OnElicitationAnswersTheAgent: with OnElicitation set,
// Start declares both modes, the agent is offered them, the handler gets
// the form (mode, message, schema read out) and its Accept reaches the
// agent; OnElicitationDecided gets the audit.
func TestElicitation_OnElicitationAnswersTheAgent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mark := testmark.New()
	var mu sync.Mutex
	var asked []client.ElicitationRequest
	var decided []client.ElicitationDecided
	c := start(t, client.Options{
		OnElicitation: func(_ context.Context, req client.ElicitationRequest) client.ElicitationResponse {
			mu.Lock()
			asked = append(asked, req)
			mu.Unlock()
			return client.Accept(json.RawMessage(`{"strategy":"aggressive"}`))
		},
		OnElicitationDecided: func(d client.ElicitationDecided) {
			mu.Lock()
			decided = append(decided, d)
			mu.Unlock()
		},
	})
	s, chunks := elicitChunks(t, ctx, c, mark, "elicit=form")
	want := []string{`elicit caps: {"form":{},"url":{}}`, `elicit: accept {"strategy":"aggressive"}`}
	if strings.Join(chunks, "|") != strings.Join(want, "|") {
		t.Errorf("agent reported %q, want %q", chunks, want)
	}
	if _, err := s.Close(ctx, client.CloseParams{Reason: "done"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-c.Done() // every event delivered
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0].Session != s.ID() || asked[0].RequestID != "t1" || asked[0].Mode != "form" ||
		asked[0].Message == "" || !strings.Contains(string(asked[0].RequestedSchema), "strategy") {
		t.Errorf("handler got %+v", asked)
	}
	if len(decided) != 1 || decided[0].Action != "accept" || decided[0].Rule != "host" {
		t.Errorf("audits %+v, want one accept by host", decided)
	}
	assertNoMarkedProcess(t, mark)
}

// TestElicitation_WithdrawnEndsTheHandlerContext: an elicitation the
// agent withdraws ends the handler's ctx (the sidecar's $/cancelRequest);
// what the handler then returns is ignored: the agent got -32800.
func TestElicitation_WithdrawnEndsTheHandlerContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mark := testmark.New()
	ended := make(chan struct{}, 1)
	c := start(t, client.Options{
		OnElicitation: func(hctx context.Context, req client.ElicitationRequest) client.ElicitationResponse {
			select {
			case <-hctx.Done():
				ended <- struct{}{}
			case <-time.After(30 * time.Second):
			}
			return client.Accept(json.RawMessage(`{"strategy":"balanced"}`))
		},
	})
	s, chunks := elicitChunks(t, ctx, c, mark, "elicit=form,elicit-withdraw=200")
	if len(chunks) != 2 || chunks[1] != "elicit: error -32800" {
		t.Errorf("agent reported %q, want the -32800 of its withdrawal", chunks)
	}
	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatal("the handler's ctx did not end")
	}
	if _, err := s.Close(ctx, client.CloseParams{Reason: "done"}); err != nil {
		t.Fatal(err)
	}
	assertNoMarkedProcess(t, mark)
}

// TestElicitation_ModesRestrictWhatAgentsAreOffered: ElicitationModes
// {Form} offers agents form only; a url elicitation is refused -32602.
func TestElicitation_ModesRestrictWhatAgentsAreOffered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mark := testmark.New()
	c := start(t, client.Options{
		ElicitationModes: &client.ElicitationModes{Form: true},
		OnElicitation: func(context.Context, client.ElicitationRequest) client.ElicitationResponse {
			t.Error("the handler was asked")
			return client.Decline()
		},
	})
	s, chunks := elicitChunks(t, ctx, c, mark, "elicit=url")
	want := []string{`elicit caps: {"form":{}}`, "elicit: error -32602"}
	if strings.Join(chunks, "|") != strings.Join(want, "|") {
		t.Errorf("agent reported %q, want %q", chunks, want)
	}
	if _, err := s.Close(ctx, client.CloseParams{Reason: "done"}); err != nil {
		t.Fatal(err)
	}
	assertNoMarkedProcess(t, mark)
}

// TestElicitation_BoundEndsTheHandlerContext: an elicitation the host
// leaves unanswered past elicitationTimeoutMs is answered cancel by the
// sidecar, and the handler's ctx ends with that audit, not only with the
// turn (which goes on for 3 s: slow-turn).
func TestElicitation_BoundEndsTheHandlerContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mark := testmark.New()
	ended := make(chan time.Time, 1)
	c := start(t, client.Options{
		OnElicitation: func(hctx context.Context, req client.ElicitationRequest) client.ElicitationResponse {
			select {
			case <-hctx.Done():
				ended <- time.Now()
			case <-time.After(30 * time.Second):
			}
			return client.Accept(json.RawMessage(`{"strategy":"balanced"}`))
		},
	})
	s, err := c.Open(ctx, client.OpenParams{SessionKey: "client-elicit-bound", Agent: "generic",
		Command: client.Command{Path: faultagentBin, Args: []string{"--mode", "elicit=form,slow-turn=3000"}}, Cwd: t.TempDir(),
		Env: map[string]string{testmark.Env: mark}, ElicitationTimeoutMs: 300})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	var got []string
	res, err := s.Prompt(ctx, client.PromptParams{RequestID: "t1", Prompt: "ask"}, func(u client.Update) {
		var chunk struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(u.Update, &chunk) == nil && strings.HasPrefix(chunk.Content.Text, "elicit: ") {
			got = append(got, chunk.Content.Text)
		}
	})
	returned := time.Now()
	if err != nil || res.Status != "completed" {
		t.Fatalf("Prompt: %+v, %v", res, err)
	}
	if len(got) != 1 || got[0] != "elicit: cancel null" {
		t.Errorf("agent reported %q, want the bound's cancel", got)
	}
	select {
	case at := <-ended:
		if returned.Sub(at) < time.Second { // the turn goes on 3 s after the bound
			t.Errorf("the handler's ctx ended %v before the turn's end: with the turn, not at the bound", returned.Sub(at))
		}
	case <-ctx.Done():
		t.Fatal("the handler's ctx did not end")
	}
	if _, err := s.Close(ctx, client.CloseParams{Reason: "done"}); err != nil {
		t.Fatal(err)
	}
	assertNoMarkedProcess(t, mark)
}
