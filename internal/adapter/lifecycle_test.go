package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Per-turn lifecycle on the fakes (docs/protocol.md §24, PROTOCOL §10.1):
// retire after a turn, revive on the next call, close of a parked session,
// live-tree slots.

// loadingAgent is a fake agent that offers session/load (and close), as a
// per-turn session needs.
func loadingAgent() *fakeAgent {
	a := newFakeAgent()
	a.set("initialize", func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) {
		return json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"sessionCapabilities":{"close":{}}},` +
			`"agentInfo":{"name":"fake-agent","version":"0"}}`), nil
	})
	a.set("session/load", func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) {
		return json.RawMessage(`{}`), nil
	})
	return a
}

func perTurnOpen(t *testing.T, key string) protocol.OpenParams {
	p := fakeOpen(t, key)
	p.Lifecycle = &protocol.Lifecycle{Mode: protocol.LifecyclePerTurn}
	return p
}

func openOK(t *testing.T, m *Manager, p protocol.OpenParams) protocol.OpenResult {
	t.Helper()
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), p, r) }))
	if o.err != nil {
		t.Fatalf("open: %v", o.err)
	}
	return o.v.(protocol.OpenResult)
}

func promptOK(t *testing.T, m *Manager, id, rid string) protocol.PromptResult {
	t.Helper()
	o := wait(t, start(func(r session.Reply) {
		m.Prompt(context.Background(), protocol.PromptParams{Session: id, RequestID: rid, Prompt: json.RawMessage(`"hi"`)}, r)
	}))
	if o.err != nil {
		t.Fatalf("prompt %s: %v", rid, o.err)
	}
	res := o.v.(protocol.PromptResult)
	if res.Status != protocol.TurnCompleted {
		t.Fatalf("prompt %s: %+v", rid, res)
	}
	return res
}

func lifeNotes(h *recHost, session string) []protocol.LifecycleState {
	var out []protocol.LifecycleState
	for _, n := range notesOf[protocol.LifecycleNotice](h, protocol.NotifySessionLifecycle) {
		if n.Session == session {
			out = append(out, n.State)
		}
	}
	return out
}

// TestLifecycle_PerTurnRetiresAndRevives: a per-turn session's tree is
// ended after its turn (proof origin retire, complete; state parked; the
// host told parked with the proof), the next prompt launches a second tree
// that loads the same ACP session — never session/new — and the host is
// told reviving then live; a close of the parked session after the second
// retire ends nothing and proves it.
func TestLifecycle_PerTurnRetiresAndRevives(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := loadingAgent()
	l := &fakeLauncher{agent: agent}
	h := newRecHost()
	m := fakeManager(t, l, h)
	res := openOK(t, m, perTurnOpen(t, "per-turn"))
	if res.Lifecycle != protocol.LifecyclePerTurn {
		t.Errorf("open result lifecycle %q", res.Lifecycle)
	}
	promptOK(t, m, res.Session, "t1")
	retire := waitNote(t, h, protocol.NotifySessionLifecycle, func(n protocol.LifecycleNotice) bool { return n.State == protocol.LifeParked })
	if p := retire.Proof; p == nil || !p.Complete || p.Origin != protocol.OriginRetire || len(p.Processes) != 1 {
		t.Fatalf("retire proof %+v: want complete, origin retire, the provider listed", p)
	}
	if n := l.tree(0).terminated(); n != 1 {
		t.Fatalf("first tree terminated %d times after the retire, want 1", n)
	}
	st := wait(t, start(func(r session.Reply) { m.Status(protocol.SessionRef{Session: res.Session}, r) })).v.(protocol.StatusResult)
	if st.State != protocol.StateParked || st.Lifecycle == nil || st.Lifecycle.State != protocol.LifeParked || st.Lifecycle.Retires != 1 || st.Process.Alive {
		t.Fatalf("status after retire: state %s lifecycle %+v alive %v", st.State, st.Lifecycle, st.Process.Alive)
	}

	promptOK(t, m, res.Session, "t2")
	if n := l.started(); n != 2 {
		t.Fatalf("%d trees started, want 2 (the revive launched one)", n)
	}
	if agent.count("session/load") != 1 || agent.count("session/new") != 1 {
		t.Errorf("session/new %d, session/load %d: want one of each (a revive loads, never news)", agent.count("session/new"), agent.count("session/load"))
	}
	waitNote(t, h, protocol.NotifySessionLifecycle, func(n protocol.LifecycleNotice) bool { return n.State == protocol.LifeLive })
	waitNote(t, h, protocol.NotifySessionLifecycle, func(n protocol.LifecycleNotice) bool {
		return n.Proof != nil && n.Proof.Origin == protocol.OriginRetire && n.Proof.Processes[0].Pid == l.tree(1).Info().Pid
	})
	if got := lifeNotes(h, res.Session); len(got) != 4 || got[0] != protocol.LifeParked || got[1] != protocol.LifeReviving ||
		got[2] != protocol.LifeLive || got[3] != protocol.LifeParked {
		t.Errorf("session/lifecycle states %v, want parked reviving live parked", got)
	}

	o := wait(t, start(func(r session.Reply) { m.Close(protocol.CloseParams{Session: res.Session, Reason: "done"}, r) }))
	if o.err != nil {
		t.Fatalf("close of a parked session: %v", o.err)
	}
	p := o.v.(protocol.CloseResult).Proof
	if !p.Complete || len(p.Processes) != 0 || p.Origin != protocol.OriginClose || p.Verified.Method == "" {
		t.Errorf("parked close proof %+v: want complete, no process, origin close", p)
	}
	if l.started() != 2 {
		t.Errorf("the close of a parked session launched a tree")
	}
	m.Shutdown()
	m.Wait()
}

// TestLifecycle_PerTurnRefusedWithoutResume: an agent that offers neither
// session/resume nor session/load cannot be per-turn: the open fails
// CAPABILITY_UNSUPPORTED with a complete proof, nothing left.
func TestLifecycle_PerTurnRefusedWithoutResume(t *testing.T) {
	defer goleak.VerifyNone(t)
	l := &fakeLauncher{agent: newFakeAgent()}
	m := fakeManager(t, l, newRecHost())
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), perTurnOpen(t, "no-resume"), r) }))
	var pe *protocol.Error
	if !errors.As(o.err, &pe) || pe.Data.Code != protocol.ErrCapabilityUnsupported || pe.Data.Cleanup == nil || !pe.Data.Cleanup.Complete {
		t.Fatalf("open: %v (data %+v), want CAPABILITY_UNSUPPORTED with a complete proof", o.err, pe)
	}
	if l.tree(0).terminated() != 1 {
		t.Errorf("the refused open's tree was not ended")
	}
	m.Shutdown()
	m.Wait()
}

// TestLifecycle_ReviveThatCannotResumeLosesTheSession: the agent refuses
// the revive's session/load: the prompt fails SESSION_LOST with the
// revive's complete proof, and the session is closed.
func TestLifecycle_ReviveThatCannotResumeLosesTheSession(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := loadingAgent()
	l := &fakeLauncher{agent: agent}
	h := newRecHost()
	m := fakeManager(t, l, h)
	res := openOK(t, m, perTurnOpen(t, "lost"))
	promptOK(t, m, res.Session, "t1")
	agent.set("session/load", func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) {
		return nil, &jsonrpc2.Error{Code: -32002, Message: "no such session"}
	})
	o := wait(t, start(func(r session.Reply) {
		m.Prompt(context.Background(), protocol.PromptParams{Session: res.Session, RequestID: "t2", Prompt: json.RawMessage(`"hi"`)}, r)
	}))
	var pe *protocol.Error
	if !errors.As(o.err, &pe) || pe.Data.Code != protocol.ErrSessionLost || pe.Data.Cleanup == nil || !pe.Data.Cleanup.Complete {
		t.Fatalf("prompt after a lost revive: %v, want SESSION_LOST with a complete proof", o.err)
	}
	st := wait(t, start(func(r session.Reply) { m.Status(protocol.SessionRef{Session: res.Session}, r) }))
	if sr, ok := st.v.(protocol.StatusResult); !ok || sr.State != protocol.StateClosed || sr.Lifecycle == nil || sr.Lifecycle.State != protocol.LifeEnded {
		t.Errorf("status after SESSION_LOST: %+v %v, want closed, lifecycle ended", st.v, st.err)
	}
	ended := waitNote(t, h, protocol.NotifySessionLifecycle, func(n protocol.LifecycleNotice) bool { return n.State == protocol.LifeEnded })
	if ended.Error == nil || ended.Error.Code != protocol.ErrSessionLost {
		t.Errorf("ended notice %+v: want error SESSION_LOST", ended)
	}
	for _, n := range notesOf[protocol.ProofNotice](h, protocol.NotifyCleanupProof) {
		if n.Proof.CleanupID == pe.Data.Cleanup.CleanupID {
			t.Errorf("the revive's proof went out as cleanup/proof too, though the prompt's error carries it")
		}
	}
	m.Shutdown()
	m.Wait()
}
