package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestActor_RecordMarkedClosedWhileTheTreeEnds: the record of a closing
// session is marked closed while the ACP session/close is still in flight
// (off the path from close to proof); a close that joins asking to discard
// still gets the record deleted; a plain close keeps it, closed.
func TestActor_RecordMarkedClosedWhileTheTreeEnds(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, joinDiscard := range []bool{false, true} {
		agent := newFakeAgent()
		closing, release := make(chan struct{}), make(chan struct{})
		agent.set("session/close", func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) {
			close(closing)
			<-release
			return json.RawMessage(`{}`), nil
		})
		l := &fakeLauncher{agent: agent}
		m := fakeManager(t, l, newRecHost())
		p := fakeOpen(t, "marked")
		o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), p, r) }))
		if o.err != nil {
			t.Fatal(o.err)
		}
		id := o.v.(protocol.OpenResult).Session
		st, err := store.Open(m.sh.Config.StateDir)
		if err != nil {
			t.Fatal(err)
		}
		first := start(func(r session.Reply) { m.Close(protocol.CloseParams{Session: id, Reason: "first"}, r) })
		<-closing
		actorBarrier(m, id) // runs on the actor after the close began
		rec, err := st.Load("marked")
		if err != nil || !rec.Closed {
			t.Fatalf("record while session/close is in flight: %v (err %v); want closed", rec != nil && rec.Closed, err)
		}
		var second <-chan outcome
		if joinDiscard {
			second = start(func(r session.Reply) {
				m.Close(protocol.CloseParams{Session: id, Reason: "second", DiscardPersistentState: true}, r)
			})
			actorBarrier(m, id) // the second close has joined
		}
		close(release)
		if o := wait(t, first); o.err != nil || !o.v.(protocol.CloseResult).Proof.Complete {
			t.Fatalf("close: %+v", o)
		}
		rec, err = st.Load("marked")
		switch {
		case joinDiscard:
			if o := wait(t, second); o.err != nil {
				t.Fatalf("joined close: %v", o.err)
			}
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("record after a joined discard: err %v; want deleted", err)
			}
		case err != nil || !rec.Closed:
			t.Fatalf("record after close: closed %v (err %v); want kept, closed", rec != nil && rec.Closed, err)
		}
		m.Shutdown()
		m.Wait()
	}
}

// actorBarrier returns once session id's actor has run every command sent
// before it.
func actorBarrier(m *Manager, id string) {
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	done := make(chan struct{})
	s.Do(func() { close(done) }, func() { close(done) })
	<-done
}
