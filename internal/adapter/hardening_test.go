package adapter

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

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
	m.sh.Config.Caps.StateRead = 100 * time.Millisecond
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "busy"), r) }))
	if o.err != nil {
		t.Fatal(o.err)
	}
	id := o.v.(protocol.OpenResult).Session
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	release := make(chan struct{})
	s.Do(func() { <-release }, func() {}) // the actor is busy until release
	for i := 0; i < 1000; i++ {           // more commands than any channel held: none blocks
		m.Cancel(protocol.CancelParams{Session: id}, func(any, error) {})
	}
	if ls := m.List(); len(ls) != 1 || ls[0].State != protocol.StateOpen {
		t.Fatalf("list of a busy session: %+v", ls)
	}
	st := wait(t, start(func(r session.Reply) { m.Status(protocol.SessionRef{Session: id}, r) }))
	res, ok := st.v.(protocol.StatusResult)
	if st.err != nil || !ok || !res.FromSnapshot || res.Session != id || res.State != protocol.StateOpen || res.Identity.BackendSessionID == "" {
		t.Fatalf("status of a busy session: %+v %v", st.v, st.err)
	}
	close(release)
	st = wait(t, start(func(r session.Reply) { m.Status(protocol.SessionRef{Session: id}, r) }))
	if res, ok := st.v.(protocol.StatusResult); st.err != nil || !ok || res.FromSnapshot {
		t.Fatalf("status of a free session: %+v %v", st.v, st.err)
	}
	m.Shutdown()
	m.Wait()
}
