package adapter

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestActor_OptionNamedCancelledIsAnOption: an agent's option whose
// optionId is "cancelled" is an option like any other — the host that
// selects it has it sent to the agent as selected, audited by its kind
// (approved) — not the cancelled outcome (docs/protocol.md §9: only the
// host's outcome "cancelled", or an id the agent did not offer, cancels).
func TestActor_OptionNamedCancelledIsAnOption(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := newFakeAgent()
	got := make(chan string, 1)
	agent.set("session/prompt", func(ctx context.Context, conn *jsonrpc2.Conn, _ json.RawMessage) (any, error) {
		var res permissionOutcome
		err := conn.Call(ctx, "session/request_permission", json.RawMessage(`{"sessionId":"fake-session",`+
			`"toolCall":{"toolCallId":"call-1","kind":"execute","title":"run make"},`+
			`"options":[{"optionId":"cancelled","kind":"allow_once","name":"Allow"},{"optionId":"reject","kind":"reject_once","name":"Reject"}]}`), &res)
		if err != nil {
			return nil, err
		}
		got <- res.Outcome.Outcome + " " + res.Outcome.OptionID
		return json.RawMessage(`{"stopReason":"end_turn"}`), nil
	})
	l := &fakeLauncher{agent: agent}
	h := newRecHost()
	h.perms = true
	m := fakeManager(t, l, h)
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "optid"), r) }))
	if o.err != nil {
		t.Fatal(o.err)
	}
	id := o.v.(protocol.OpenResult).Session
	turn := start(func(r session.Reply) {
		m.Prompt(context.Background(), protocol.PromptParams{Session: id, RequestID: "t1", Prompt: json.RawMessage(`"go"`)}, r)
	})
	var ask hostAsk
	select {
	case ask = <-h.asks:
	case <-time.After(10 * time.Second):
		t.Fatal("the host was not asked")
	}
	ask.answer <- protocol.PermissionRequestResult{Outcome: protocol.AskSelected, OptionID: "cancelled"}
	if res := wait(t, turn).v.(protocol.PromptResult); res.Status != protocol.TurnCompleted {
		t.Fatalf("turn: %+v", res)
	}
	if g := <-got; g != "selected cancelled" {
		t.Errorf("the agent was answered %q, want its option \"cancelled\" selected", g)
	}
	var decisions []protocol.Decision
	for _, n := range notesOf[protocol.PermissionNotice](h, protocol.NotifySessionPermission) {
		if n.ToolCallID == "call-1" && n.Decision != protocol.DecisionEscalated {
			decisions = append(decisions, n.Decision)
		}
	}
	if len(decisions) != 1 || decisions[0] != protocol.DecisionApproved {
		t.Errorf("audit decisions %v, want [approved]", decisions)
	}
	wait(t, start(func(r session.Reply) { m.Close(protocol.CloseParams{Session: id}, r) }))
	m.Shutdown()
	m.Wait()
}
