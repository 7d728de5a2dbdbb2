package client_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// Per-turn sessions and the state store through the client
// (docs/protocol.md §24), against the built sidecar and the fault agent.

// agentDir makes the fault agent's --state-dir inside cwd (writable under
// the default sandbox, workspace), where it persists its sessions so a new
// process can load them.
func agentDir(t *testing.T, cwd, name string) string {
	t.Helper()
	d := filepath.Join(cwd, name)
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// perTurnOpen are open params of a per-turn fault-agent session (mode
// recall: each turn first says "recall: N earlier prompts: …") whose agent
// keeps its sessions in dir.
func perTurnOpen(key, cwd, dir, mark string) client.OpenParams {
	return client.OpenParams{
		SessionKey:                key,
		Agent:                     "generic",
		Command:                   client.Command{Path: faultagentBin, Args: []string{"--mode", "recall", "--state-dir", dir}},
		Cwd:                       cwd,
		Env:                       map[string]string{testmark.Env: mark},
		PermissionMode:            "approve-reads",
		NonInteractivePermissions: "deny",
		Lifecycle:                 &client.Lifecycle{Mode: client.LifecyclePerTurn},
	}
}

// turnText runs one turn and returns its agent_message_chunk text.
func turnText(ctx context.Context, t *testing.T, s *client.Session, requestID, prompt string) string {
	t.Helper()
	var b strings.Builder
	res, err := s.Prompt(ctx, client.PromptParams{RequestID: requestID, Prompt: prompt}, func(u client.Update) {
		var c struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if u.Kind() == "agent_message_chunk" && json.Unmarshal(u.Update, &c) == nil {
			b.WriteString(c.Content.Text + "\n")
		}
	})
	if err != nil {
		t.Fatalf("Prompt %s: %v", requestID, err)
	}
	if res.Status != "completed" {
		t.Fatalf("Prompt %s: %+v", requestID, res)
	}
	return b.String()
}

// waitParked waits for the session to park and checks the retire proof.
func waitParked(ctx context.Context, t *testing.T, s *client.Session) *client.LifecycleNotice {
	t.Helper()
	n, err := s.WaitLifecycle(ctx, client.LifecycleParked)
	if err != nil {
		t.Fatalf("WaitLifecycle(parked): %v", err)
	}
	if n.Session != s.ID() || n.Proof == nil || !n.Proof.Complete || n.Proof.Origin != "retire" || len(n.Proof.Processes) == 0 {
		t.Fatalf("parked notice %+v (proof %+v): want the retire's complete proof, origin retire, its processes", n, n.Proof)
	}
	return n
}

// TestPerTurn_ParkReviveThroughTheClient: a per-turn session's two turns
// through the client: after each the tree is retired (WaitLifecycle
// parked with the retire's proof; no process of the session is left), the
// second Prompt revives it (Lifecycle live when Prompt returns) and the
// revived agent remembers the first turn; OnLifecycle hears parked,
// reviving, live, parked in order; Status and Stats count the retires and
// revives; the close of a parked session proves an empty tree and ends
// the lifecycle (WaitLifecycle then fails SESSION_ENDED).
func TestPerTurn_ParkReviveThroughTheClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	mark := testmark.New()
	notes := make(chan client.LifecycleNotice, 16)
	retires := make(chan client.Proof, 16)
	c := start(t, client.Options{
		OnLifecycle: func(n client.LifecycleNotice) { notes <- n },
		OnProof: func(p client.Proof) {
			if p.Origin == "retire" {
				retires <- p
			}
		},
		OnExited: func(e client.Exited) { t.Errorf("unexpected session/exited: %+v", e) },
	})
	cwd := t.TempDir()
	p := perTurnOpen("per-turn", cwd, agentDir(t, cwd, ".agent"), mark)
	p.ReviveWaitMs = new(int64(30000))
	s, err := c.Open(ctx, p)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if r := s.Result(); r.Lifecycle != client.LifecyclePerTurn || r.Restore != nil {
		t.Fatalf("Open result lifecycle %q restore %+v: want per-turn, nothing restored", r.Lifecycle, r.Restore)
	}
	if n := s.Lifecycle(); n != nil {
		t.Fatalf("Lifecycle before any retire: %+v, want nil", n)
	}

	turnText(ctx, t, s, "t1", "the first prompt")
	first := waitParked(ctx, t, s)
	assertNoMarkedProcess(t, mark)
	st, err := s.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.State != "parked" || st.Lifecycle == nil || st.Lifecycle.Mode != client.LifecyclePerTurn ||
		st.Lifecycle.State != client.LifecycleParked || st.Lifecycle.Retires != 1 || st.Lifecycle.Revives != 0 {
		t.Fatalf("Status after the retire: state %q lifecycle %+v", st.State, st.Lifecycle)
	}
	if st.Store != nil {
		t.Errorf("Status store %+v without --state-store, want nil", st.Store)
	}
	stats, err := c.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if stats.Sessions.Parked != 1 || stats.LiveTrees.Live != 0 {
		t.Errorf("Stats while parked: sessions %+v liveTrees %+v, want 1 parked, 0 live", stats.Sessions, stats.LiveTrees)
	}

	// The prompt on the parked session revives it: by the time Prompt
	// returns, the client has read reviving and live.
	if txt := turnText(ctx, t, s, "t2", "the second prompt"); !strings.Contains(txt, "recall: 1 earlier prompts: the first prompt") {
		t.Fatalf("the revived agent does not remember the first turn; turn 2 said %q", txt)
	}
	if n := s.Lifecycle(); n == nil || n.State != client.LifecycleLive {
		t.Fatalf("Lifecycle right after the revived turn: %+v, want live", n)
	}
	if n, err := s.WaitLifecycle(ctx, client.LifecycleLive); err != nil || n.State != client.LifecycleLive {
		t.Fatalf("WaitLifecycle(live) when live: %+v, %v", n, err)
	}
	second := waitParked(ctx, t, s)
	if second.Proof.Processes[0].Pid == first.Proof.Processes[0].Pid {
		t.Errorf("the second retire ended pid %d again: the revive launched no new provider", second.Proof.Processes[0].Pid)
	}
	assertNoMarkedProcess(t, mark)

	var states []string
	for len(states) < 4 {
		select {
		case n := <-notes:
			if n.Session != s.ID() || n.SessionKey != "per-turn" {
				t.Errorf("notice %+v: want session %s, key per-turn", n, s.ID())
			}
			states = append(states, string(n.State))
		case <-ctx.Done():
			t.Fatalf("OnLifecycle heard %v, want 4 notices", states)
		}
	}
	if got := strings.Join(states, " "); got != "parked reviving live parked" {
		t.Errorf("OnLifecycle states %q, want parked reviving live parked", got)
	}
	for i := range 2 {
		select {
		case p := <-retires:
			if p.Session != s.ID() || !p.Complete {
				t.Errorf("retire proof %d through OnProof: %+v", i, p)
			}
		case <-ctx.Done():
			t.Fatalf("OnProof got %d retire proofs, want 2", i)
		}
	}

	st, err = s.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.Lifecycle == nil || st.Lifecycle.Retires != 2 || st.Lifecycle.Revives != 1 || st.Lifecycle.LastReviveMs == nil {
		t.Fatalf("Status after two turns: lifecycle %+v, want 2 retires, 1 revive, lastReviveMs", st.Lifecycle)
	}

	proof, err := s.Close(ctx, client.CloseParams{Reason: "done"})
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !proof.Complete || proof.Origin != "close" || len(proof.Processes) != 0 || proof.Publication != nil {
		t.Fatalf("close of a parked session: %+v, want complete, no process, no publication", proof)
	}
	var ce *client.Error
	if _, err := s.WaitLifecycle(ctx, client.LifecycleLive); !errors.As(err, &ce) || ce.DataCode != client.DataCodeSessionEnded {
		t.Fatalf("WaitLifecycle after the close: %v, want SESSION_ENDED", err)
	}
	if n := s.Lifecycle(); n != nil {
		t.Errorf("Lifecycle after the close: %+v, want nil", n)
	}
	if _, err := c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	assertNoMarkedProcess(t, mark)
}

// masterKey writes a 32-byte state-store master key, mode 0600.
func masterKey(t *testing.T) string {
	t.Helper()
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	p := filepath.Join(t.TempDir(), "state.key")
	if err := os.WriteFile(p, k, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStateStore_PublicationThroughTheClient: with a file:// state store
// and the open's StateDirs naming the fault agent's directory, the retire
// publishes (Proof.Publication "published"), the parked session's close
// has nothing new (skipped), and Status shows the key's head; a second sidecar
// with another state dir and another agent directory opens the same key,
// restores the archive (OpenResult.Restore) and its agent remembers the
// first sidecar's turn.
func TestStateStore_PublicationThroughTheClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	mark := testmark.New()
	key, store := masterKey(t), "file://"+t.TempDir()
	flags := []string{"--state-store", store, "--state-key-file", key}
	cwd := t.TempDir()

	a := start(t, client.Options{Args: flags})
	caps := a.Info().Capabilities.StateStore
	if caps == nil || caps.Kind != "file" || !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(caps.KeyID) {
		t.Fatalf("capabilities.stateStore %+v: want kind file, a 16-hex keyId", caps)
	}
	dirA := agentDir(t, cwd, ".agent-a")
	p := perTurnOpen("portable", cwd, dirA, mark)
	p.StateDirs = map[string]string{"agent": dirA}
	s, err := a.Open(ctx, p)
	if err != nil {
		t.Fatalf("Open on A: %v", err)
	}
	turnText(ctx, t, s, "t1", "alpha")
	retire := waitParked(ctx, t, s).Proof.Publication
	if retire == nil || retire.State != client.PublicationPublished {
		t.Fatalf("retire publication %+v: want published", retire)
	}
	st, err := s.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.Store == nil || st.Store.Generation != retire.Generation || st.Store.Owner.SidecarID == "" {
		t.Fatalf("Status store %+v: want the retire's generation %d and an owner", st.Store, retire.Generation)
	}
	proof, err := s.Close(ctx, client.CloseParams{})
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Parked since a retire that published: no tree ran since, so the
	// close has nothing new to publish (docs/protocol.md §24).
	if cp := proof.Publication; !proof.Complete || cp == nil || cp.State != client.PublicationSkipped || cp.Error != nil {
		t.Fatalf("close proof %+v publication %+v: want complete, skipped (nothing new)", proof, cp)
	}
	pub := retire
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(pub.SHA256) || pub.Object == "" || pub.Entries == 0 {
		t.Fatalf("retire publication %+v: want an object, its SHA-256, entries", pub)
	}
	if _, err := a.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown A: %v", err)
	}
	if err := os.RemoveAll(dirA); err != nil {
		t.Fatal(err)
	}

	b := start(t, client.Options{Args: flags})
	dirB := agentDir(t, cwd, ".agent-b")
	p = perTurnOpen("portable", cwd, dirB, mark)
	p.StateDirs = map[string]string{"agent": dirB}
	s, err = b.Open(ctx, p)
	if err != nil {
		t.Fatalf("Open on B: %v", err)
	}
	if r := s.Result().Restore; r == nil || r.Generation != pub.Generation || r.Entries == 0 {
		t.Fatalf("Open on B restored %+v: want generation %d", r, pub.Generation)
	}
	if txt := turnText(ctx, t, s, "t2", "beta"); !strings.Contains(txt, "recall: 1 earlier prompts: alpha") {
		t.Fatalf("on B the agent does not remember A's turn: %q", txt)
	}
	waitParked(ctx, t, s)
	if _, err := b.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown B: %v", err)
	}
	assertNoMarkedProcess(t, mark)
}
