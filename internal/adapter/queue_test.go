package adapter

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestQueue_ProviderDeathAnswersQueuedTurns: two turns queued behind a
// running one when the provider dies: the running turn fails
// PROVIDER_PROCESS_LOST, each queued turn is answered failed
// PROVIDER_PROCESS_LOST too (never sent to the agent), and sidecar/stats
// counts three failed turns and no queued one (docs/protocol.md §8, Queued
// turns; §17).
func TestQueue_ProviderDeathAnswersQueuedTurns(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := newFakeAgent()
	started := make(chan struct{}, 4)
	agent.set("session/prompt", func(ctx context.Context, _ *jsonrpc2.Conn, _ json.RawMessage) (any, error) {
		started <- struct{}{}
		<-ctx.Done() // never answers: the provider dies first
		return nil, ctx.Err()
	})
	l := &fakeLauncher{agent: agent}
	h := newRecHost()
	m := fakeManager(t, l, h)
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "dies"), r) }))
	if o.err != nil {
		t.Fatal(o.err)
	}
	id := o.v.(protocol.OpenResult).Session
	prompt := func(rid string) <-chan outcome {
		return start(func(r session.Reply) {
			m.Prompt(context.Background(), protocol.PromptParams{Session: id, RequestID: rid, Prompt: json.RawMessage(`"x"`), Queue: true}, r)
		})
	}
	t1 := prompt("t1")
	<-started
	t2, t3 := prompt("t2"), prompt("t3")
	st := wait(t, start(func(r session.Reply) { m.Status(protocol.SessionRef{Session: id}, r) })).v.(protocol.StatusResult)
	if len(st.QueuedRequestIDs) != 2 || st.QueuedRequestIDs[0] != "t2" || st.QueuedRequestIDs[1] != "t3" {
		t.Fatalf("queuedRequestIds %v, want [t2 t3]", st.QueuedRequestIDs)
	}
	if s := m.Stats(); s.Turns.Queued != 2 || s.Turns.Running != 1 {
		t.Errorf("stats turns %+v, want running 1 queued 2", s.Turns)
	}
	l.tree(0).die()
	for _, ch := range []<-chan outcome{t1, t2, t3} {
		res := wait(t, ch).v.(protocol.PromptResult)
		if res.Status != "failed" || res.Error == nil || res.Error.Code != protocol.ErrProviderProcessLost {
			t.Errorf("turn %s: %+v, want failed PROVIDER_PROCESS_LOST", res.RequestID, res)
		}
	}
	if n := agent.count("session/prompt"); n != 1 {
		t.Errorf("agent received %d prompts, want only the running one", n)
	}
	waitNote(t, h, protocol.NotifyCleanupProof, func(protocol.ProofNotice) bool { return true })
	if s := m.Stats(); s.Turns.Queued != 0 || s.Turns.Failed != 3 || s.Sessions.Dead != 1 || s.Proofs.Complete != 1 {
		t.Errorf("stats %+v, want queued 0, failed 3, one dead session, one complete proof", s)
	}
	m.Shutdown()
	m.Wait()
}

// TestJournal_ExitAndProofJournaled: the session/exited and cleanup/proof
// of a provider death are in the key's journal, after the session's
// updates, with the last update's seq (docs/protocol.md §16).
func TestJournal_ExitAndProofJournaled(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := newFakeAgent()
	l := &fakeLauncher{agent: agent}
	h := newRecHost()
	m := fakeManager(t, l, h)
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "jn"), r) }))
	if o.err != nil {
		t.Fatal(o.err)
	}
	l.tree(0).die()
	waitNote(t, h, protocol.NotifyCleanupProof, func(protocol.ProofNotice) bool { return true })
	// The entry was written before its frame reached the host.
	ch := make(chan outcome, 1)
	m.Events(protocol.EventsParams{SessionKey: "jn"}, func(v any, err error) { ch <- outcome{v, err} })
	r := wait(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	page := r.v.(protocol.EventsResult)
	var methods []string
	for _, e := range page.Events {
		var ev struct {
			Seq    uint64 `json:"seq"`
			Method string `json:"method"`
		}
		_ = json.Unmarshal(e, &ev)
		methods = append(methods, ev.Method)
	}
	if len(methods) != 2 || methods[0] != protocol.NotifySessionExited || methods[1] != protocol.NotifyCleanupProof {
		t.Errorf("journal methods %v, want session/exited then cleanup/proof", methods)
	}
	m.Shutdown()
	m.Wait()
}

// TestQueue_CancelRequestOfQueuedTurn: $/cancelRequest of a queued
// prompt (its ctx) answers it cancelled at once and it never reaches the
// agent; the running turn is untouched and the next queued one runs after
// it.
func TestQueue_CancelRequestOfQueuedTurn(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := newFakeAgent()
	started, release := make(chan string, 4), make(chan struct{})
	agent.set("session/prompt", func(_ context.Context, _ *jsonrpc2.Conn, raw json.RawMessage) (any, error) {
		var p struct {
			Prompt []struct {
				Text string `json:"text"`
			} `json:"prompt"`
		}
		_ = json.Unmarshal(raw, &p)
		started <- p.Prompt[0].Text
		<-release
		return map[string]any{"stopReason": "end_turn"}, nil
	})
	l := &fakeLauncher{agent: agent}
	m := fakeManager(t, l, newRecHost())
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "cr"), r) }))
	if o.err != nil {
		t.Fatal(o.err)
	}
	id := o.v.(protocol.OpenResult).Session
	prompt := func(ctx context.Context, rid string) <-chan outcome {
		return start(func(r session.Reply) {
			m.Prompt(ctx, protocol.PromptParams{Session: id, RequestID: rid, Prompt: json.RawMessage(`"` + rid + `"`), Queue: true}, r)
		})
	}
	t1 := prompt(context.Background(), "t1")
	if got := <-started; got != "t1" {
		t.Fatalf("agent started %q", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t2 := prompt(ctx, "t2")
	t3 := prompt(context.Background(), "t3")
	cancel()
	if res := wait(t, t2).v.(protocol.PromptResult); res.Status != "cancelled" || res.StopReason != "cancelled" || res.RequestID != "t2" {
		t.Fatalf("t2 %+v, want cancelled/cancelled", res)
	}
	close(release)
	if res := wait(t, t1).v.(protocol.PromptResult); res.Status != "completed" {
		t.Errorf("t1 %+v, want completed", res)
	}
	if got := <-started; got != "t3" {
		t.Errorf("agent started %q after t1, want t3", got)
	}
	if res := wait(t, t3).v.(protocol.PromptResult); res.Status != "completed" {
		t.Errorf("t3 %+v, want completed", res)
	}
	if n := agent.count("session/prompt"); n != 2 {
		t.Errorf("agent received %d prompts, want 2", n)
	}
	m.Shutdown()
	m.Wait()
}
