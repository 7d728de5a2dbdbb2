package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The session actor against fakes (fake_test.go): no process is started.

// TestActor_AdmissionFailureEndsTheTree: the agent refuses session/new →
// the open fails ACPX_SESSION_ENSURE_FAILED with the agent's explanation
// redacted, the tree is terminated once, no session/close is sent (there is
// no session) and the open's cleanup proof is complete
// (docs/rules.md#r5, docs/rules.md#r14).
func TestActor_AdmissionFailureEndsTheTree(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := newFakeAgent()
	const secret = "sk-fake-launch-secret"
	agent.set("session/new", func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) {
		return nil, &jsonrpc2.Error{Code: -32603, Message: "no session for key " + secret} // not ACP auth_required (-32000): docs/protocol.md §23
	})
	l := &fakeLauncher{agent: agent}
	m := fakeManager(t, l, newRecHost())
	p := fakeOpen(t, "refused")
	p.Env = map[string]string{"FAKE_API_KEY": secret}

	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), p, r) }))
	var pe *protocol.Error
	if !errors.As(o.err, &pe) || pe.Data.Code != protocol.ErrEnsureFailed {
		t.Fatalf("open: %v, want %s", o.err, protocol.ErrEnsureFailed)
	}
	if strings.Contains(pe.Message, secret) || !strings.Contains(pe.Message, "[redacted]") {
		t.Errorf("message %q: want the agent's explanation with the secret redacted", pe.Message)
	}
	pr := pe.Data.Cleanup
	if pr == nil || !pr.Complete || pr.Origin != protocol.OriginAdmission || pr.ProtocolClose.Outcome != protocol.CloseSkipped {
		t.Fatalf("cleanup proof %+v: want complete, origin admission, protocol close skipped", pr)
	}
	if pr.Containment != string(fakeMode) || len(pr.Processes) != 1 || pr.Processes[0].Pid != l.tree(0).Info().Pid {
		t.Errorf("proof containment %q processes %+v: want the fake tree's", pr.Containment, pr.Processes)
	}
	if n := l.tree(0).terminated(); n != 1 {
		t.Errorf("tree terminated %d times, want 1", n)
	}
	if n := agent.count("session/close"); n != 0 {
		t.Errorf("session/close sent %d times with no session", n)
	}
	if len(m.List()) != 0 {
		t.Errorf("the failed open is still listed: %+v", m.List())
	}
	m.Shutdown()
	m.Wait()
}

// TestActor_CloseIsIdempotent: two closes of a session, the second sent
// while the first is in flight, and a third after it, share one cleanup:
// one session/close, one termination, the same proof each time
// (docs/rules.md#r16, docs/rules.md#r17).
func TestActor_CloseIsIdempotent(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := newFakeAgent()
	closing, release := make(chan struct{}), make(chan struct{})
	agent.set("session/close", func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) {
		close(closing)
		<-release
		return json.RawMessage(`{}`), nil
	})
	l := &fakeLauncher{agent: agent}
	m := fakeManager(t, l, newRecHost())
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "twice"), r) }))
	if o.err != nil {
		t.Fatal(o.err)
	}
	id := o.v.(protocol.OpenResult).Session

	first := start(func(r session.Reply) { m.Close(protocol.CloseParams{Session: id, Reason: "first"}, r) })
	<-closing
	second := start(func(r session.Reply) { m.Close(protocol.CloseParams{Session: id, Reason: "second"}, r) })
	// List runs on the actor after the second close: it joined the first.
	if st := m.List()[0].State; st != protocol.StateClosing {
		t.Errorf("state %q while the close is in flight, want closing", st)
	}
	close(release)
	var proofs []*protocol.Proof
	for _, ch := range []<-chan outcome{first, second,
		start(func(r session.Reply) { m.Close(protocol.CloseParams{Session: id, Reason: "third"}, r) })} {
		o := wait(t, ch)
		if o.err != nil {
			t.Fatalf("close: %v", o.err)
		}
		proofs = append(proofs, o.v.(protocol.CloseResult).Proof)
	}
	for i, p := range proofs {
		if p.CleanupID != proofs[0].CleanupID || !p.Complete || p.Reason != "first" || p.ProtocolClose.Outcome != protocol.CloseOK {
			t.Errorf("close %d proof %+v: want the first close's complete proof", i+1, p)
		}
	}
	if n := l.tree(0).terminated(); n != 1 {
		t.Errorf("tree terminated %d times, want 1", n)
	}
	if n := agent.count("session/close"); n != 1 {
		t.Errorf("session/close sent %d times, want 1", n)
	}
	m.Shutdown()
	m.Wait()
}

// TestActor_RetainedCleanupProvesLater: a tree that cannot be proven empty
// fails the close CLEANUP_INCOMPLETE with the incomplete proof; the cleanup
// is retained (the sessionKey stays held) and retried until the tree is
// proven gone, and the final proof, same cleanupId, arrives as cleanup/proof
// (docs/rules.md#r15, docs/rules.md#r20).
func TestActor_RetainedCleanupProvesLater(t *testing.T) {
	defer goleak.VerifyNone(t)
	l := &fakeLauncher{agent: newFakeAgent(), unprovable: true}
	h := newRecHost()
	m := fakeManager(t, l, h)
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "stuck"), r) }))
	if o.err != nil {
		t.Fatal(o.err)
	}
	id := o.v.(protocol.OpenResult).Session

	o = wait(t, start(func(r session.Reply) { m.Close(protocol.CloseParams{Session: id, Reason: "stuck"}, r) }))
	var pe *protocol.Error
	if !errors.As(o.err, &pe) || pe.Data.Code != protocol.ErrCleanupIncomplete || pe.Data.Proof == nil || pe.Data.Proof.Complete {
		t.Fatalf("close: %v, want CLEANUP_INCOMPLETE with an incomplete proof", o.err)
	}
	first := pe.Data.Proof
	o = wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "stuck"), r) }))
	if !errors.As(o.err, &pe) || pe.Data.Code != protocol.ErrSessionKeyInUse {
		t.Fatalf("reopen during the retained cleanup: %v, want SESSION_KEY_IN_USE", o.err)
	}
	tree := l.tree(0)
	deadline := time.Now().Add(5 * time.Second)
	for tree.terminated() < 3 && time.Now().Before(deadline) { // retried with backoff
		time.Sleep(5 * time.Millisecond)
	}
	if n := tree.terminated(); n < 3 {
		t.Fatalf("terminated %d times; the retained cleanup is not retrying", n)
	}
	tree.setProvable(true)
	final := waitNote(t, h, protocol.NotifyCleanupProof, func(n protocol.ProofNotice) bool {
		return n.Proof != nil && n.Proof.Complete
	}).Proof
	if final.CleanupID != first.CleanupID || final.Attempts < 2 || !final.Verified.TreeEmpty || final.Origin != protocol.OriginClose {
		t.Errorf("final proof %+v: want the first's cleanupId, complete, attempts counted", final)
	}
	// Proven: the key is free again.
	o = wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "stuck"), r) }))
	if o.err != nil {
		t.Fatalf("reopen after the proof: %v", o.err)
	}
	l.tree(1).setProvable(true)
	m.Shutdown()
	m.Wait()
}

// permissionOutcome is the ACP outcome the fake agent received.
type permissionOutcome struct {
	Outcome struct {
		Outcome  string `json:"outcome"`
		OptionID string `json:"optionId"`
	} `json:"outcome"`
}

// TestActor_LateHostAnswerApprovesNothing: a host answer that arrives after
// its turn ended approves nothing, in that turn or the next: the agent's
// ask in the cancelled turn gets "cancelled", the late "allow" is dropped,
// and the next turn's ask is decided only by the next answer
// (docs/rules.md#r27).
func TestActor_LateHostAnswerApprovesNothing(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := newFakeAgent()
	got := make(chan string, 4) // the outcome of each ask, per turn
	agent.set("session/prompt", func(ctx context.Context, conn *jsonrpc2.Conn, _ json.RawMessage) (any, error) {
		var res permissionOutcome
		err := conn.Call(ctx, "session/request_permission", json.RawMessage(`{"sessionId":"fake-session",`+
			`"toolCall":{"toolCallId":"call-1","kind":"execute","title":"run rm -rf /"},`+
			`"options":[{"optionId":"allow","kind":"allow_once","name":"Allow"},{"optionId":"reject","kind":"reject_once","name":"Reject"}]}`), &res)
		if err != nil {
			return nil, err
		}
		got <- res.Outcome.Outcome + " " + res.Outcome.OptionID
		if res.Outcome.Outcome == "cancelled" {
			return json.RawMessage(`{"stopReason":"cancelled"}`), nil
		}
		return json.RawMessage(`{"stopReason":"end_turn"}`), nil
	})
	l := &fakeLauncher{agent: agent}
	h := newRecHost()
	h.perms = true
	m := fakeManager(t, l, h)
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "late"), r) }))
	if o.err != nil {
		t.Fatal(o.err)
	}
	id := o.v.(protocol.OpenResult).Session
	prompt := func(rid string) <-chan outcome {
		return start(func(r session.Reply) {
			m.Prompt(context.Background(), protocol.PromptParams{Session: id, RequestID: rid, Prompt: json.RawMessage(`"go"`)}, r)
		})
	}
	nextAsk := func() hostAsk {
		t.Helper()
		select {
		case a := <-h.asks:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("the host was not asked")
			return hostAsk{}
		}
	}

	turn1 := prompt("t1")
	late := nextAsk() // escalated: execute under approve-reads
	wait(t, start(func(r session.Reply) { m.Cancel(protocol.CancelParams{Session: id}, r) }))
	if res := wait(t, turn1).v.(protocol.PromptResult); res.Status != "cancelled" {
		t.Fatalf("turn 1: %+v, want cancelled", res)
	}
	if g := <-got; g != "cancelled " {
		t.Fatalf("turn 1's ask answered %q, want cancelled", g)
	}

	turn2 := prompt("t2")
	next := nextAsk()
	// The host's answer to turn 1 arrives now, during turn 2.
	late.answer <- protocol.PermissionRequestResult{Outcome: "selected", OptionID: "allow"}
	if *next.params.RequestID != "t2" || *late.params.RequestID != "t1" {
		t.Fatalf("asks for %s and %s, want t1 then t2", *late.params.RequestID, *next.params.RequestID)
	}
	// Give the late answer time to reach the idle actor (it is dropped
	// there, so nothing observable marks its arrival), then answer turn 2.
	time.Sleep(50 * time.Millisecond)
	wait(t, start(func(r session.Reply) { m.Status(protocol.SessionRef{Session: id}, r) }))
	select {
	case g := <-got:
		t.Fatalf("the late host answer reached the agent: %q", g)
	default:
	}
	next.answer <- protocol.PermissionRequestResult{Outcome: "selected", OptionID: "reject"}
	if res := wait(t, turn2).v.(protocol.PromptResult); res.Status != "completed" {
		t.Fatalf("turn 2: %+v", res)
	}
	if g := <-got; g != "selected reject" {
		t.Fatalf("turn 2's ask answered %q, want the host's reject", g)
	}
	for _, n := range notesOf[protocol.PermissionNotice](h, protocol.NotifySessionPermission) {
		if n.Decision == "approved" {
			t.Errorf("something was approved: %+v", n)
		}
	}
	wait(t, start(func(r session.Reply) { m.Close(protocol.CloseParams{Session: id}, r) }))
	m.Shutdown()
	m.Wait()
}

// TestActor_CloseDuringAdmissionKeepsTheHostsReason (found by a user
// trial): a host's session/close that arrives while the session is still
// admitting waits for the admission, then closes the session with the
// host's reason and origin "close" — not as a shutdown.
func TestActor_CloseDuringAdmissionKeepsTheHostsReason(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := newFakeAgent()
	entered, release := make(chan struct{}), make(chan struct{})
	agent.set("session/new", func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) {
		close(entered)
		<-release
		return json.RawMessage(`{"sessionId":"fake-session"}`), nil
	})
	m := fakeManager(t, &fakeLauncher{agent: agent}, newRecHost())
	opened := start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "early-close"), r) })
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent never got session/new")
	}
	l := m.List()
	if len(l) != 1 || l[0].State != protocol.StateAdmitting {
		t.Fatalf("list %+v, want one admitting session", l)
	}
	closed := start(func(r session.Reply) {
		m.Close(protocol.CloseParams{Session: l[0].Session, Reason: "close while admitting"}, r)
	})
	m.List() // runs on the actor after the close: it is registered
	close(release)
	if o := wait(t, opened); o.err != nil {
		t.Fatalf("open: %v", o.err)
	}
	c := wait(t, closed)
	if c.err != nil {
		t.Fatalf("close: %v", c.err)
	}
	pr := c.v.(protocol.CloseResult).Proof
	if pr.Origin != protocol.OriginClose || pr.Reason != "close while admitting" || !pr.Complete {
		t.Errorf("proof origin %q reason %q complete %v, want origin close with the host's reason", pr.Origin, pr.Reason, pr.Complete)
	}
	m.Shutdown()
	m.Wait()
}

// TestActor_ShutdownAfterAHostCloseDuringAdmissionAbortsIt (from a
// review): a host's close joined by shutdown while the session is still
// admitting does not wait for the agent: the admission is aborted
// (SHUTTING_DOWN, not the handshake's bound running out) and both are
// answered.
func TestActor_ShutdownAfterAHostCloseDuringAdmissionAbortsIt(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := newFakeAgent()
	entered, release := make(chan struct{}), make(chan struct{})
	agent.set("session/new", func(ctx context.Context, _ *jsonrpc2.Conn, _ json.RawMessage) (any, error) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return json.RawMessage(`{"sessionId":"fake-session"}`), nil
	})
	defer close(release)
	m := fakeManager(t, &fakeLauncher{agent: agent}, newRecHost())
	opened := start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "close-then-shutdown"), r) })
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent never got session/new")
	}
	id := m.List()[0].Session
	closed := start(func(r session.Reply) { m.Close(protocol.CloseParams{Session: id, Reason: "host close"}, r) })
	m.List() // the close is registered on the actor
	done := make(chan []*protocol.Proof, 1)
	go func() { done <- m.Shutdown() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("shutdown waited for the admission the host's close was waiting for")
	}
	// Aborted by shutdown, not ended by the handshake's bound.
	var pe *protocol.Error
	if o := wait(t, opened); !errors.As(o.err, &pe) || pe.Data.Code != protocol.ErrShuttingDown {
		t.Errorf("open: %v, want %s", o.err, protocol.ErrShuttingDown)
	}
	if c := wait(t, closed); c.err == nil && (c.v.(protocol.CloseResult).Proof == nil || !c.v.(protocol.CloseResult).Proof.Complete) {
		t.Errorf("close: %+v, want a complete proof", c.v)
	}
	m.Wait()
}
