package e2e

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/agentenv"
	"github.com/acpx-sidecar/acpx-sidecar/internal/modelstub"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
	"github.com/acpx-sidecar/acpx-sidecar/internal/wirecheck"
)

// clientSchemaTap is an Options.OnFrame that validates every frame against
// docs/protocol.schema.json; a violation fails t.
func clientSchemaTap(t testing.TB) func(client.Frame) {
	t.Helper()
	tap := wirecheck.Tap(t)
	return func(f client.Frame) { tap(f.Sent, f.Raw, f.Data) }
}

// TestGoClient_CodexHost is the Go half of issue 10's "done when": a host
// written with package client runs open → a prompt whose execute is
// escalated and answered by the host (OnPermission) → status → close with
// a complete proof → shutdown, against the built binary and the real
// @agentclientprotocol/codex-acp 2.6.0 (internal/agentenv) talking to the
// loopback model stub. Every frame is validated against the schema.
//
// Not parallel: it runs before the parallel agent suites, so it adds no
// load to their handshake bounds.
func TestGoClient_CodexHost(t *testing.T) {
	stub := modelstub.New(t.Logf)
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	// The agent's HOME is the key's private one the sidecar gives it: no
	// env.HOME in the open (docs/protocol.md §19).
	stateDir := t.TempDir()
	launch, err := agentenv.Prepare("codex", repoRoot, srv.URL, agentenv.KeyHome(stateDir, "goclient-codex"))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("codex cannot be prepared (make deps installs the agents): %v", err)
		}
		t.Skipf("codex not installed (run `make deps`): %v", err)
	}
	work, secret, mark := t.TempDir(), "sk-goclient-"+randHex(12), testmark.New()
	killMarkedOnCleanup(t, mark)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var asked []client.PermissionRequest
	var decisions []client.PermissionDecision
	var extNotes []client.ExtNotification
	logs := &syncWriter{}
	c, err := client.Start(ctx, client.Options{
		Binary:   sidecarBin,
		StateDir: stateDir,
		Stderr:   logs,
		OnFrame:  clientSchemaTap(t),
		OnPermission: func(_ context.Context, req client.PermissionRequest) client.PermissionOutcome {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req)
			for _, o := range req.Options {
				if o.Kind == "allow_once" {
					return client.Selected(o.OptionID)
				}
			}
			return client.Cancelled()
		},
		OnDecision: func(d client.PermissionDecision) {
			mu.Lock()
			decisions = append(decisions, d)
			mu.Unlock()
		},
		OnExited: func(e client.Exited) { t.Errorf("unexpected session/exited: %+v", e) },
		// codex-acp 2.6 pushes `_auth/status_update` after initialize
		// (docs/agents.md): it reaches the host (docs/protocol.md §23).
		OnExtNotification: func(n client.ExtNotification) {
			mu.Lock()
			extNotes = append(extNotes, n)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	trackChild(c.Process().Pid) // its Wait is the client's, not the orphan reaper's (another test may run one)
	t.Cleanup(func() {
		select {
		case <-c.Done():
		default:
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ccancel()
			_ = c.Close(cctx)
		}
		if t.Failed() {
			t.Logf("sidecar stderr:\n%s", truncate(logs.String(), 8000))
		}
	})

	env := map[string]string{launch.KeyEnv: secret, "ACPX_TEST_MARK": mark}
	for k, v := range launch.Env {
		env[k] = v
	}
	s, err := c.Open(ctx, client.OpenParams{
		SessionKey:       "goclient-codex",
		Agent:            launch.Agent,
		Command:          client.Command{Path: launch.Command.Path, Args: launch.Command.Args},
		Cwd:              work,
		Env:              env,
		PermissionMode:   "approve-all",
		PermissionPolicy: &client.PermissionPolicy{Escalate: []string{"execute"}},
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if r := s.Result(); !r.PermissionBinding.Bound || r.Process.Pid == 0 {
		t.Fatalf("open result: binding %+v, process %+v", r.PermissionBinding, r.Process)
	}
	waitUntil(t, 30*time.Second, "codex-acp's _auth/status_update", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range extNotes {
			if n.Method == "_auth/status_update" && n.Session == s.ID() && len(n.Params) > 0 {
				return true
			}
		}
		return false
	})

	var kinds []string
	var seqs []uint64
	res, err := s.Prompt(ctx, client.PromptParams{RequestID: "t1", Prompt: "make a file\nrun: echo escalated > escalated.txt"},
		func(u client.Update) { kinds, seqs = append(kinds, u.Kind()), append(seqs, u.Seq) })
	if err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	if res.Status != "completed" || res.RequestID != "t1" {
		t.Fatalf("turn result %+v", res)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Errorf("update seqs %v have a gap", seqs)
			break
		}
	}
	if b, err := os.ReadFile(filepath.Join(work, "escalated.txt")); err != nil || strings.TrimSpace(string(b)) != "escalated" {
		t.Fatalf("the command the host approved did not run: %v %q (stub commands %v; updates %v)", err, b, stub.Stats().Commands, kinds)
	}
	mu.Lock()
	if len(asked) == 0 || asked[0].Session != s.ID() || asked[0].RequestID != "t1" || asked[0].Kind != "execute" {
		t.Errorf("permission requests %+v: want an execute ask of turn t1", asked)
	}
	var audit []string
	for _, d := range decisions {
		audit = append(audit, string(d.Decision)+"/"+d.Rule)
	}
	mu.Unlock()
	if !anyHasPrefix(audit, "escalated/permissionPolicy.escalate") || !anyHasPrefix(audit, "approved/host") {
		t.Errorf("decisions %v: want escalated by the policy, then approved by the host", audit)
	}

	st, err := s.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.State != "open" || st.LastRequestID == nil || *st.LastRequestID != "t1" || !st.Process.Alive ||
		st.Identity != s.Result().Identity {
		t.Errorf("status %+v", st)
	}

	proof, err := s.Close(ctx, client.CloseParams{Reason: "host done"})
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !proof.Complete || !proof.Verified.TreeEmpty || proof.Origin != "close" || proof.Reason != "host done" {
		t.Errorf("close proof %+v", proof)
	}
	waitNoMarked(t, mark, "", 10*time.Second)

	proofs, err := c.Shutdown(ctx)
	if err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, p := range proofs {
		if !p.Complete {
			t.Errorf("shutdown proof incomplete: %+v", p)
		}
	}
	if code := c.ExitCode(); code != 0 {
		t.Errorf("sidecar exit status %d, want 0", code)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the API key appears in the sidecar's stderr")
	}
}

// anyHasPrefix reports whether an element of list starts with s.
func anyHasPrefix(list []string, s string) bool {
	for _, x := range list {
		if strings.HasPrefix(x, s) {
			return true
		}
	}
	return false
}

// syncWriter collects a sidecar's stderr.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
