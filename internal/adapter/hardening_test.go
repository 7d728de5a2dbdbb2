package adapter

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

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

// TestParseAsk_StrictDecoding: the policy's members are read
// case-sensitively; a duplicate member, a case variant of a member the
// policy reads, a mistyped one or a repeated optionId make the ask
// malformed (docs/protocol.md §20).
func TestParseAsk_StrictDecoding(t *testing.T) {
	ok := `{"sessionId":"s","toolCall":{"toolCallId":"c","kind":"read","title":"Read a","rawInput":{"path":"a"}},"options":[{"optionId":"y","kind":"allow_once","name":"Yes"},{"optionId":"n","kind":"reject_once"}]}`
	pa, why := parseAsk(json.RawMessage(ok))
	if why != "" || policyKind(pa.head) != "read" || len(pa.opts) != 2 || pickKind(pa.opts, "n") != "reject_once" {
		t.Fatalf("well-formed ask: %+v %q", pa, why)
	}
	for _, c := range []struct{ name, ask, want string }{
		{"case variant of kind", `{"toolCall":{"toolCallId":"c","Kind":"read"},"options":[]}`, "only by case"},
		{"case variant of rawInput", `{"toolCall":{"kind":"read","rawInput":{"path":"a"},"rawinput":{"command":null}},"options":[]}`, "only by case"},
		{"duplicate rawInput", `{"toolCall":{"kind":"read","rawInput":{"command":"rm -rf /"},"rawInput":{"command":null}},"options":[]}`, "occurs twice"},
		{"duplicate command", `{"toolCall":{"kind":"read","rawInput":{"command":"rm -rf /","command":null}},"options":[]}`, "occurs twice"},
		{"case variant of command", `{"toolCall":{"kind":"read","rawInput":{"Command":"rm -rf /"}},"options":[]}`, "only by case"},
		{"duplicate kind", `{"toolCall":{"kind":"execute","kind":"read"},"options":[]}`, "occurs twice"},
		{"escaped duplicate", `{"toolCall":{"kind":"execute","kin\u0064":"read"},"options":[]}`, "occurs twice"},
		{"duplicate optionId", `{"toolCall":{"kind":"edit"},"options":[{"optionId":"x","kind":"allow_always"},{"optionId":"x","kind":"reject_once"}]}`, "occurs twice"},
		{"mistyped kind", `{"toolCall":{"kind":5},"options":[]}`, "not a string"},
		{"options not an array", `{"toolCall":{"kind":"read"},"options":{}}`, "not an array"},
		{"option without id", `{"toolCall":{"kind":"read"},"options":[{"kind":"allow_once"}]}`, "optionId is not a string"},
		{"duplicate toolCall", `{"toolCall":{"kind":"execute"},"toolCall":{"kind":"read"},"options":[]}`, "occurs twice"},
		{"no toolCall", `{"options":[]}`, "no toolCall"},
	} {
		if _, why := parseAsk(json.RawMessage(c.ask)); !strings.Contains(why, c.want) {
			t.Errorf("%s: malformed reason %q, want one containing %q", c.name, why, c.want)
		}
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
