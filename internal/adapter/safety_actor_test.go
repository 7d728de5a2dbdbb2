package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestActor_PermissionTimeoutHoldsWithAHostThatIgnoresItsContext
// (docs/protocol.md §18.3): the bound is the actor's own timer, so even a
// host whose RequestPermission never returns does not hold the turn: at
// permissionTimeoutMs the ask is denied (nonInteractivePermissions deny),
// audited "timeout", the turn completes, and the host's answer that
// arrives afterwards changes nothing.
func TestActor_PermissionTimeoutHoldsWithAHostThatIgnoresItsContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent := newFakeAgent()
	got := make(chan string, 2)
	agent.set("session/prompt", func(ctx context.Context, conn *jsonrpc2.Conn, _ json.RawMessage) (any, error) {
		var res permissionOutcome
		err := conn.Call(ctx, "session/request_permission", json.RawMessage(`{"sessionId":"fake-session",`+
			`"toolCall":{"toolCallId":"call-1","kind":"execute","title":"run it"},`+
			`"options":[{"optionId":"allow","kind":"allow_once","name":"Allow"},{"optionId":"reject","kind":"reject_once","name":"Reject"}]}`), &res)
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
	p := fakeOpen(t, "bound")
	ms := int64(100)
	p.PermissionTimeoutMs = &ms
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), p, r) }))
	if o.err != nil {
		t.Fatal(o.err)
	}
	id := o.v.(protocol.OpenResult).Session
	// The bound starts when the actor escalates, after the prompt began:
	// time since begun is a lower bound of the bound's wait that does not
	// depend on when this goroutine happens to receive the ask.
	begun := time.Now()
	turn := start(func(r session.Reply) {
		m.Prompt(context.Background(), protocol.PromptParams{Session: id, RequestID: "t1", Prompt: json.RawMessage(`"go"`)}, r)
	})
	var ask hostAsk
	select {
	case ask = <-h.asks:
	case <-time.After(10 * time.Second):
		t.Fatal("the host was not asked")
	}
	res := wait(t, turn).v.(protocol.PromptResult)
	if res.Status != "completed" || time.Since(begun) < 100*time.Millisecond {
		t.Fatalf("turn %+v after %v, want completed after permissionTimeoutMs", res, time.Since(begun))
	}
	if g := <-got; g != "selected reject" {
		t.Errorf("the agent got %q, want the reject option", g)
	}
	ask.answer <- protocol.PermissionRequestResult{Outcome: "selected", OptionID: "allow"} // late: dropped
	wait(t, start(func(r session.Reply) { m.Status(protocol.SessionRef{Session: id}, r) }))
	var decisions []string
	for _, n := range notesOf[protocol.PermissionNotice](h, protocol.NotifySessionPermission) {
		decisions = append(decisions, string(n.Decision))
	}
	if strings.Join(decisions, ",") != "escalated,timeout" {
		t.Errorf("audit decisions %v, want escalated then timeout only", decisions)
	}
	wait(t, start(func(r session.Reply) { m.Close(protocol.CloseParams{Session: id}, r) }))
	m.Shutdown()
	m.Wait()
}

// TestActor_OOMKillIsReported (docs/protocol.md §18.2): status shows the
// cgroup's counters; a provider that dies after the OOM killer struck its
// tree is reported in session/exited with reason "oom", and the
// provider-exit proof carries PROVIDER_OOM. (The real kernel path is
// TestLimits_MemoryHogIsOOMKilledAndOthersGoOn in internal/e2e, which
// needs the cgroup2 memory controller.)
func TestActor_OOMKillIsReported(t *testing.T) {
	defer goleak.VerifyNone(t)
	l := &fakeLauncher{agent: newFakeAgent()}
	h := newRecHost()
	m := fakeManager(t, l, h)
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "oom"), r) }))
	if o.err != nil {
		t.Fatal(o.err)
	}
	id := o.v.(protocol.OpenResult).Session
	cur, max := int64(60<<20), int64(64<<20)
	l.tree(0).setResources(reaper.Resources{MemoryCurrent: &cur, MemoryMax: &max, OomKills: 1})
	st := wait(t, start(func(r session.Reply) { m.Status(protocol.SessionRef{Session: id}, r) }))
	if st.err != nil {
		t.Fatal(st.err)
	}
	if r := st.v.(protocol.StatusResult).Resources; r == nil || *r.MemoryMax != max || r.OomKills != 1 {
		t.Errorf("status resources %+v", r)
	}
	l.tree(0).die()
	ex := waitNote(t, h, protocol.NotifySessionExited, func(n protocol.ExitedNotice) bool { return n.Session == id })
	if ex.Reason != protocol.ExitReasonOOM {
		t.Errorf("session/exited reason %q, want oom", ex.Reason)
	}
	pr := waitNote(t, h, protocol.NotifyCleanupProof, func(n protocol.ProofNotice) bool { return n.Proof.Session == id }).Proof
	if len(pr.Errors) == 0 || pr.Errors[0].Code != protocol.ErrProviderOOM || !pr.Complete {
		t.Errorf("provider-exit proof %+v, want complete with PROVIDER_OOM", pr)
	}
	m.Shutdown()
	m.Wait()
}

// TestActor_UnwritableLedgerLaunchesNothing (docs/protocol.md §18.5):
// when the ledger entry cannot be written the launcher is never called;
// the open fails STORE_UNAVAILABLE with a complete proof whose reason
// names the ledger.
func TestActor_UnwritableLedgerLaunchesNothing(t *testing.T) {
	defer goleak.VerifyNone(t)
	l := &fakeLauncher{agent: newFakeAgent()}
	m := fakeManager(t, l, newRecHost())
	p := fakeOpen(t, "ledger")
	p.StateDir = t.TempDir()
	warm := wait(t, start(func(r session.Reply) { m.Open(context.Background(), p, r) })) // the store exists now
	if warm.err != nil {
		t.Fatal(warm.err)
	}
	wait(t, start(func(r session.Reply) {
		m.Close(protocol.CloseParams{Session: warm.v.(protocol.OpenResult).Session, DiscardPersistentState: true}, r)
	}))
	// The open's answer asked for the store's spare files to be refilled
	// (owned/ among its directories); that refill runs on its own
	// goroutine and must be over before owned/ is replaced.
	m.sh.Refills.Wait()
	owned := filepath.Join(p.StateDir, "owned")
	if err := os.RemoveAll(owned); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(owned, []byte("not a directory"), 0o600); err != nil { // every entry write fails
		t.Fatal(err)
	}
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), p, r) }))
	var e *protocol.Error
	if !errors.As(o.err, &e) || e.Data.Code != protocol.ErrStoreUnavailable {
		t.Fatalf("open with an unwritable ledger: %v, want STORE_UNAVAILABLE", o.err)
	}
	if pr := e.Data.Cleanup; pr == nil || !pr.Complete || !strings.Contains(pr.Reason, "ownership ledger") {
		t.Errorf("proof %+v, want complete, reason naming the ledger", pr)
	}
	if n := l.started(); n != 1 {
		t.Errorf("%d trees started, want only the warm-up's", n)
	}
	m.Shutdown()
	m.Wait()
}
