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

// elicitHost is a recHost that also takes elicitations: each waits at the
// host until the test answers it.
type elicitHost struct {
	*recHost
	elicits chan chan protocol.ElicitationResult
}

func (h *elicitHost) Elicitation() protocol.ElicitationCaps {
	return protocol.ElicitationCaps{Form: true}
}

func (h *elicitHost) RequestElicitation(ctx context.Context, _ protocol.ElicitationParams) (protocol.ElicitationResult, error) {
	answer := make(chan protocol.ElicitationResult, 1)
	h.elicits <- answer
	select {
	case r := <-answer:
		return r, nil
	case <-ctx.Done():
		return protocol.ElicitationResult{}, ctx.Err()
	}
}

// TestActor_PendingAsksBoundCountsElicitations (docs/protocol.md §20: at
// most maxPendingAsks permission asks and elicitations wait at the host
// together): with a bound of one and an elicitation waiting at the host,
// the agent's permission ask is not escalated but decided as an overflow
// (denied, audited "overflow").
func TestActor_PendingAsksBoundCountsElicitations(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := newFakeAgent()
	outcome := make(chan string, 1)
	atHost := make(chan struct{}) // closed once the elicitation waits at the host
	agent.set("session/prompt", func(ctx context.Context, conn *jsonrpc2.Conn, _ json.RawMessage) (any, error) {
		go func() {
			var ignored json.RawMessage
			_ = conn.Call(ctx, "elicitation/create", json.RawMessage(`{"sessionId":"fake-session","mode":"form",`+
				`"message":"Which?","requestedSchema":{"type":"object","properties":{"x":{"type":"string"}}}}`), &ignored)
		}()
		select {
		case <-atHost:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		var res permissionOutcome
		if err := conn.Call(ctx, "session/request_permission", json.RawMessage(`{"sessionId":"fake-session",`+
			`"toolCall":{"toolCallId":"call-1","kind":"execute","title":"run make"},`+
			`"options":[{"optionId":"yes","kind":"allow_once","name":"Allow"},{"optionId":"no","kind":"reject_once","name":"Reject"}]}`), &res); err != nil {
			return nil, err
		}
		outcome <- res.Outcome.Outcome + " " + res.Outcome.OptionID
		return json.RawMessage(`{"stopReason":"end_turn"}`), nil
	})
	l := &fakeLauncher{agent: agent}
	rh := newRecHost()
	rh.perms = true
	h := &elicitHost{recHost: rh, elicits: make(chan chan protocol.ElicitationResult, 2)}
	m := fakeManager(t, l, h)
	m.sh.Config.Caps.MaxPendingAsks = 1
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "asksbound"), r) }))
	if o.err != nil {
		t.Fatal(o.err)
	}
	id := o.v.(protocol.OpenResult).Session
	turn := start(func(r session.Reply) {
		m.Prompt(context.Background(), protocol.PromptParams{Session: id, RequestID: "t1", Prompt: json.RawMessage(`"go"`)}, r)
	})
	var elicit chan protocol.ElicitationResult
	select {
	case elicit = <-h.elicits:
	case <-time.After(10 * time.Second):
		t.Fatal("the elicitation did not reach the host")
	}
	close(atHost)
	var got string
	select {
	case got = <-outcome:
	case a := <-h.asks:
		a.answer <- protocol.PermissionRequestResult{Outcome: protocol.AskSelected, OptionID: "yes"}
		t.Fatalf("the permission ask was escalated to the host while an elicitation held the only slot")
	case <-time.After(10 * time.Second):
		t.Fatal("the permission ask was not answered")
	}
	if got != "selected no" {
		t.Errorf("the agent was answered %q, want its reject option (an overflow under the default policy)", got)
	}
	elicit <- protocol.ElicitationResult{Action: protocol.ElicitCancel}
	if res := wait(t, turn).v.(protocol.PromptResult); res.Status != protocol.TurnCompleted {
		t.Fatalf("turn: %+v", res)
	}
	var decisions []string
	for _, n := range notesOf[protocol.PermissionNotice](rh, protocol.NotifySessionPermission) {
		decisions = append(decisions, string(n.Decision))
	}
	if len(decisions) != 1 || decisions[0] != string(protocol.DecisionOverflow) {
		t.Errorf("permission audit %v, want one %q", decisions, protocol.DecisionOverflow)
	}
	m.Shutdown()
	m.Wait()
}
