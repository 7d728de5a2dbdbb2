package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestOutbox_WritesNeverBlockOnAnAgentThatDoesNotRead: with nobody reading
// the pipe, writes return at once until the queue's bound, then fail with
// errAgentHung, the agent is found hung once, and Close ends the writer
// (docs/protocol.md §20).
func TestOutbox_WritesNeverBlockOnAnAgentThatDoesNotRead(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var hung atomic.Int32
	o := newOutbox(w, 1<<20, time.Hour, func(why error) {
		if errors.Is(why, errAgentHung) {
			hung.Add(1)
		}
	})
	done := make(chan error, 1)
	go func() {
		frame := []byte(strings.Repeat("x", 1000) + "\n")
		for i := 0; i < 100000; i++ {
			if _, err := o.Write(frame); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errAgentHung) {
			t.Fatalf("writes past the bound: %v, want errAgentHung", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write blocked on an agent that does not read")
	}
	if hung.Load() != 1 || !o.stalled(time.Hour) {
		t.Fatalf("hung reported %d times, stalled %v", hung.Load(), o.stalled(time.Hour))
	}
	if _, err := o.Write([]byte("y\n")); !errors.Is(err, errAgentHung) {
		t.Fatalf("write after hung: %v", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Write([]byte("z\n")); !errors.Is(err, errOutboxClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

// TestOutbox_AWriteThatTakesNoByteIsHungAtTheDeadline: a chunk the pipe
// does not take within the write timeout marks the agent hung; before
// that, stalled(d) reports the write in progress.
func TestOutbox_AWriteThatTakesNoByteIsHungAtTheDeadline(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	hung := make(chan struct{})
	o := newOutbox(w, 0, 200*time.Millisecond, func(why error) {
		if errors.Is(why, os.ErrDeadlineExceeded) {
			close(hung)
		}
	})
	defer o.Close()
	if _, err := o.Write(make([]byte, 4<<20)); err != nil { // far more than a pipe holds
		t.Fatal(err)
	}
	select {
	case <-hung:
	case <-time.After(30 * time.Second):
		t.Fatal("a write that took nothing for its deadline did not mark the agent hung")
	}
	if !o.stalled(0) {
		t.Fatal("hung agent not reported stalled")
	}
}

// TestMailbox_CommandsOfAStoppedActorAreAnswered: put never blocks, and
// the commands the actor never ran are handed back to be answered.
func TestMailbox_CommandsOfAStoppedActorAreAnswered(t *testing.T) {
	mb := newMailbox()
	var answered atomic.Int32
	for i := 0; i < 10000; i++ {
		if !mb.put(func(any, error) { answered.Add(1) }, func() {}) {
			t.Fatal("put refused before close")
		}
	}
	if mb.take() == nil {
		t.Fatal("nothing to take")
	}
	replies := mb.close()
	if len(replies) != 9999 {
		t.Fatalf("%d replies handed back, want 9999", len(replies))
	}
	if mb.put(func(any, error) {}, func() {}) {
		t.Fatal("put accepted after close")
	}
}

// TestDecodeUpdateParams_OnlyACPSessionUpdates: an update that is not an
// object with a non-empty string sessionUpdate is refused; a good one is
// cleaned for the host.
func TestDecodeUpdateParams_OnlyACPSessionUpdates(t *testing.T) {
	for _, bad := range []string{
		`{"sessionId":"s","update":{}}`, `{"update":{"sessionUpdate":5}}`, `{"update":{"sessionUpdate":""}}`,
		`{"update":"agent_message_chunk"}`, `{"update":[{"sessionUpdate":"plan"}]}`, `{"update":null}`, `{}`,
		`{"update":{"SessionUpdate":"plan"}}`, `{"update":{"sessionUpdate":"plan"},"update":{"sessionUpdate":"plan"}}`,
	} {
		if _, why := decodeUpdateParams(json.RawMessage(bad)); why == "" {
			t.Errorf("%s accepted", bad)
		}
	}
	u, why := decodeUpdateParams(json.RawMessage("{\"sessionId\":\"s\",\"update\":{\"sessionUpd\\u0061te\":\"plan\",\r\"x\":\"\xff\"}}"))
	if why != "" || u.kind != kindOther || string(u.backendSessionID) != "s" || string(u.update) != "{\"sessionUpd\\u0061te\":\"plan\",\"x\":\"\uFFFD\"}" {
		t.Fatalf("escaped update: %v %q %q", u.kind, u.update, why)
	}
}

// TestActor_BusyActorIsReadFromItsSnapshot: while a session's actor is
// stuck, session/list answers at once and session/status within the
// state-read bound, from the snapshot (fromSnapshot: true, checked against
// the record); host commands sent meanwhile wait in the mailbox without
// blocking the sender and run once the actor is free (docs/protocol.md
// §20).
func TestActor_BusyActorIsReadFromItsSnapshot(t *testing.T) {
	defer goleak.VerifyNone(t)
	l := &fakeLauncher{agent: newFakeAgent()}
	m := fakeManager(t, l, newRecHost())
	m.cfg.Caps.StateRead = 100 * time.Millisecond
	o := wait(t, start(func(r Reply) { m.Open(context.Background(), fakeOpen(t, "busy"), r) }))
	if o.err != nil {
		t.Fatal(o.err)
	}
	id := o.v.(protocol.OpenResult).Session
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	release := make(chan struct{})
	s.send(func(any, error) {}, func() { <-release }) // the actor is busy until release
	for i := 0; i < 1000; i++ {                       // more commands than any channel held: none blocks
		m.Cancel(protocol.CancelParams{Session: id}, func(any, error) {})
	}
	if ls := m.List(); len(ls) != 1 || ls[0].State != protocol.StateOpen {
		t.Fatalf("list of a busy session: %+v", ls)
	}
	st := wait(t, start(func(r Reply) { m.Status(protocol.SessionRef{Session: id}, r) }))
	res, ok := st.v.(protocol.StatusResult)
	if st.err != nil || !ok || !res.FromSnapshot || res.Session != id || res.State != protocol.StateOpen || res.Identity.BackendSessionID == "" {
		t.Fatalf("status of a busy session: %+v %v", st.v, st.err)
	}
	close(release)
	st = wait(t, start(func(r Reply) { m.Status(protocol.SessionRef{Session: id}, r) }))
	if res, ok := st.v.(protocol.StatusResult); st.err != nil || !ok || res.FromSnapshot {
		t.Fatalf("status of a free session: %+v %v", st.v, st.err)
	}
	m.Shutdown()
	m.Wait()
}
