package adapter

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Calls that reach the agent outside a turn's prompt — setModel, setMode,
// extRequest, agentSessions — on a session that retires (docs/protocol.md
// §24): while one is in flight no retire starts, so the agent answers it
// on the connection it was sent on; once it has, the session retires as
// it would have. A trial found the retire that follows a revive sent
// session/close (and then ended the tree) under a control request the
// revive had just started: the host was told the call failed ("jsonrpc2:
// connection is closed", or PROVIDER_PROCESS_LOST) though the agent had
// applied it.

// agentCallCase is one host call that reaches the agent, the ACP method
// it sends there and the fake agent's answer to that method.
type agentCallCase struct {
	name, method, answer string
	call                 func(m *Manager, session string, r session.Reply)
}

func agentCallCases() []agentCallCase {
	return []agentCallCase{
		{"setModel", "session/set_model", `{}`, func(m *Manager, id string, r session.Reply) {
			m.SetModel(protocol.SetModelParams{Session: id, Model: "fake-large"}, r)
		}},
		{"setMode", "session/set_mode", `{}`, func(m *Manager, id string, r session.Reply) {
			m.SetMode(protocol.SetModeParams{Session: id, Mode: "plan"}, r)
		}},
		{"extRequest", "_fake/echo", `{"echo":true}`, func(m *Manager, id string, r session.Reply) {
			m.ExtRequest(protocol.ExtRequestParams{Session: id, Method: "_fake/echo", Params: json.RawMessage(`{}`)}, r)
		}},
		{"agentSessions", "session/list", `{"sessions":[]}`, func(m *Manager, id string, r session.Reply) {
			m.AgentSessions(protocol.AgentSessionsParams{Session: id}, r)
		}},
	}
}

// callsAgent is a loading agent that also lists its sessions and reports
// two modes, so every agentCallCase reaches it.
func callsAgent() *fakeAgent {
	a := loadingAgent()
	a.set("initialize", func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) {
		return json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"sessionCapabilities":{"close":{},"list":{}}},` +
			`"agentInfo":{"name":"fake-agent","version":"0"}}`), nil
	})
	const modes = `"modes":{"currentModeId":"default","availableModes":[{"id":"default","name":"Default"},{"id":"plan","name":"Plan"}]}`
	a.set("session/new", func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) {
		return json.RawMessage(`{"sessionId":"fake-session",` + modes + `}`), nil
	})
	a.set("session/load", func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) {
		return json.RawMessage(`{` + modes + `}`), nil
	})
	return a
}

// heldCall is the fake agent's first request of a method, held unanswered:
// entered is closed when it arrives, and it is answered once release is.
type heldCall struct {
	entered, release chan struct{}
	once             sync.Once
}

// holdFirst makes agent hold its first request of method (later ones are
// answered at once), then answer it answer.
func holdFirst(agent *fakeAgent, method, answer string) *heldCall {
	h := &heldCall{entered: make(chan struct{}), release: make(chan struct{})}
	var first sync.Once
	agent.set(method, func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) {
		held := false
		first.Do(func() { held = true; close(h.entered) })
		if held {
			<-h.release
		}
		return json.RawMessage(answer), nil
	})
	return h
}

// let answers the held request (once; safe to repeat).
func (h *heldCall) let() { h.once.Do(func() { close(h.release) }) }

// arrived waits up to 10 s for the held request to reach the agent.
func (h *heldCall) arrived(t *testing.T, what string) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never reached the agent", what)
	}
}

// statusOf answers session/status through the actor.
func statusOf(t *testing.T, m *Manager, id string) protocol.StatusResult {
	t.Helper()
	o := wait(t, start(func(r session.Reply) { m.Status(protocol.SessionRef{Session: id}, r) }))
	if o.err != nil {
		t.Fatalf("status: %v", o.err)
	}
	return o.v.(protocol.StatusResult)
}

// wantNoRetire fails when the session is not open and live or the agent
// was sent session/close more than closes times: a retire started while
// a call to the agent was in flight.
func wantNoRetire(t *testing.T, m *Manager, agent *fakeAgent, id string, closes int, what string) {
	t.Helper()
	st := statusOf(t, m, id)
	if st.State != protocol.StateOpen || st.Lifecycle == nil || st.Lifecycle.State != protocol.LifeLive {
		t.Fatalf("%s: the session is %s (lifecycle %+v) while the call is in flight, want open and live: a retire started under it",
			what, st.State, st.Lifecycle)
	}
	if n := agent.count("session/close"); n != closes {
		t.Fatalf("%s: the agent got session/close %d times while the call was in flight, want %d", what, n, closes)
	}
}

// waitParkedN waits for the session's n-th parked notice.
func waitParkedN(t *testing.T, h *recHost, id string, n int) {
	t.Helper()
	waitNote(t, h, protocol.NotifySessionLifecycle, func(protocol.LifecycleNotice) bool {
		k := 0
		for _, s := range lifeNotes(h, id) {
			if s == protocol.LifeParked {
				k++
			}
		}
		return k >= n
	})
}

// TestLifecycle_CallOnParkedSessionHoldsOffTheRetire: a call to a parked
// per-turn session revives it, and the retire after that revive waits
// until the agent has answered the call: while the agent holds it, the
// session stays open and live and the agent gets no session/close; the
// call then succeeds and the session retires again.
func TestLifecycle_CallOnParkedSessionHoldsOffTheRetire(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, c := range agentCallCases() {
		t.Run(c.name, func(t *testing.T) {
			agent := callsAgent()
			held := holdFirst(agent, c.method, c.answer)
			defer held.let()
			l := &fakeLauncher{agent: agent}
			h := newRecHost()
			m := fakeManager(t, l, h)
			res := openOK(t, m, perTurnOpen(t, "parked-"+c.name))
			promptOK(t, m, res.Session, "t1")
			waitParkedN(t, h, res.Session, 1)

			ch := start(func(r session.Reply) { c.call(m, res.Session, r) })
			held.arrived(t, c.name)
			// The revive's last step on the actor started the call; every
			// command sent from now on runs after that step.
			wantNoRetire(t, m, agent, res.Session, 1, c.name+" after a revive")
			held.let()
			if o := wait(t, ch); o.err != nil {
				t.Fatalf("%s on a parked session: %v", c.name, o.err)
			}
			waitParkedN(t, h, res.Session, 2)
			if l.started() != 2 || agent.count("session/close") != 2 {
				t.Errorf("%d trees, %d session/close: want the revive's tree, retired once after the call", l.started(), agent.count("session/close"))
			}
			m.Shutdown()
			m.Wait()
		})
	}
}

// TestLifecycle_CallInFlightAtTurnEndHoldsOffTheRetire: a call sent to the
// agent during a per-turn session's turn is still unanswered when the turn
// ends: the session does not retire until it is answered, then does.
func TestLifecycle_CallInFlightAtTurnEndHoldsOffTheRetire(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, c := range agentCallCases() {
		t.Run(c.name, func(t *testing.T) {
			agent := callsAgent()
			turn := holdFirst(agent, "session/prompt", `{"stopReason":"end_turn"}`)
			defer turn.let()
			held := holdFirst(agent, c.method, c.answer)
			defer held.let()
			l := &fakeLauncher{agent: agent}
			h := newRecHost()
			m := fakeManager(t, l, h)
			res := openOK(t, m, perTurnOpen(t, "turn-"+c.name))
			prompt := start(func(r session.Reply) {
				m.Prompt(context.Background(), protocol.PromptParams{Session: res.Session, RequestID: "t1", Prompt: json.RawMessage(`"hi"`)}, r)
			})
			turn.arrived(t, "the prompt")
			ch := start(func(r session.Reply) { c.call(m, res.Session, r) })
			held.arrived(t, c.name)
			turn.let()
			if o := wait(t, prompt); o.err != nil || o.v.(protocol.PromptResult).Status != protocol.TurnCompleted {
				t.Fatalf("prompt: %+v %v", o.v, o.err)
			}
			// The turn's end was decided on the actor before its answer.
			wantNoRetire(t, m, agent, res.Session, 0, c.name+" at the turn's end")
			held.let()
			if o := wait(t, ch); o.err != nil {
				t.Fatalf("%s during the turn: %v", c.name, o.err)
			}
			waitParkedN(t, h, res.Session, 1)
			m.Shutdown()
			m.Wait()
		})
	}
}

// TestLifecycle_CallInFlightHoldsOffTheIdleRetire: a warm session whose
// idleRetireMs passes while a call to the agent is in flight retires only
// once the agent has answered it.
func TestLifecycle_CallInFlightHoldsOffTheIdleRetire(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := callsAgent()
	turn := holdFirst(agent, "session/prompt", `{"stopReason":"end_turn"}`)
	defer turn.let()
	held := holdFirst(agent, "_fake/echo", `{}`)
	defer held.let()
	l := &fakeLauncher{agent: agent}
	h := newRecHost()
	m := fakeManager(t, l, h)
	p := fakeOpen(t, "idle-call")
	idle := int64(1)
	p.Lifecycle = &protocol.Lifecycle{Mode: protocol.LifecycleWarm, IdleRetireMs: &idle}
	res := openOK(t, m, p)
	prompt := start(func(r session.Reply) {
		m.Prompt(context.Background(), protocol.PromptParams{Session: res.Session, RequestID: "t1", Prompt: json.RawMessage(`"hi"`)}, r)
	})
	turn.arrived(t, "the prompt")
	ch := start(func(r session.Reply) {
		m.ExtRequest(protocol.ExtRequestParams{Session: res.Session, Method: "_fake/echo"}, r)
	})
	held.arrived(t, "the extension request")
	turn.let()
	if o := wait(t, prompt); o.err != nil {
		t.Fatalf("prompt: %v", o.err)
	}
	// The idle bound (1 ms) passes many times over while the call is held.
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		wantNoRetire(t, m, agent, res.Session, 0, "past the idle bound")
	}
	held.let()
	if o := wait(t, ch); o.err != nil {
		t.Fatalf("extension request: %v", o.err)
	}
	waitParkedN(t, h, res.Session, 1) // retired once the call was answered
	m.Shutdown()
	m.Wait()
}
