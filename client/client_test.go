package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
	"github.com/acpx-sidecar/acpx-sidecar/internal/wirecheck"
)

// schemaTap returns an Options.OnFrame that validates every frame against
// docs/protocol.schema.json (a violation fails t) and then calls next.
func schemaTap(t *testing.T, next func(client.Frame)) func(client.Frame) {
	t.Helper()
	tap := wirecheck.Tap(t)
	return func(f client.Frame) {
		tap(f.Sent, f.Raw, f.Data)
		if next != nil {
			next(f)
		}
	}
}

var sidecarBin, faultagentBin string

// TestMain builds the sidecar and the fault agent once, runs the tests
// and then checks that no goroutine was left behind.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acpx-client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sidecarBin = filepath.Join(dir, "acpx-sidecar")
	faultagentBin = filepath.Join(dir, "faultagent")
	for bin, pkg := range map[string]string{sidecarBin: "./cmd/acpx-sidecar", faultagentBin: "./internal/faultagent"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", pkg, err, out)
			_ = os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// syncBuffer collects the sidecar's stderr for failure reports.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs a sidecar for t; the sidecar is killed at the end of t if the
// test did not shut it down, and its stderr is logged if t failed.
func start(t *testing.T, opts client.Options) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logs := &syncBuffer{}
	opts.Binary, opts.StateDir, opts.Stderr = sidecarBin, t.TempDir(), logs
	opts.OnFrame = schemaTap(t, opts.OnFrame)
	opts.Args = append(opts.Args, "--log-level", "debug")
	c, err := client.Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		select {
		case <-c.Done():
		default:
			_ = c.Close(closeCtx)
		}
		if t.Failed() {
			t.Logf("sidecar stderr:\n%s", logs.String())
		}
	})
	return c
}

// markedLive lists the live (non-zombie) processes carrying
// ACPX_TEST_MARK=mark.
func markedLive(mark string) []string {
	want := []byte(testmark.Env + "=" + mark + "\x00")
	var live []string
	envs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range envs {
		env, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(append(env, 0), want) {
			continue
		}
		dir := filepath.Dir(f)
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			continue
		}
		live = append(live, filepath.Base(dir))
	}
	return live
}

// assertNoMarkedProcess fails if a process carrying mark is still alive
// after a short grace.
func assertNoMarkedProcess(t *testing.T, mark string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		live := markedLive(mark)
		if len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes with %s=%s still alive: %v", testmark.Env, mark, live)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSessionLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mark := testmark.New()

	var mu sync.Mutex
	var asked []client.PermissionRequest
	var chosen string
	var decisions []client.PermissionDecision
	c := start(t, client.Options{
		OnPermission: func(_ context.Context, req client.PermissionRequest) client.PermissionOutcome {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req)
			for _, o := range req.Options {
				if o.Kind == "allow_once" {
					chosen = o.OptionID
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
		OnProof:  func(p client.Proof) { t.Logf("unexpected cleanup/proof: %+v", p) },
		OnExited: func(e client.Exited) { t.Errorf("unexpected session/exited: %+v", e) },
	})
	if info := c.Info(); info.ProtocolVersion != 1 || info.Pid == 0 {
		t.Fatalf("Info = %+v", info)
	}

	s, err := c.Open(ctx, client.OpenParams{
		SessionKey:     "client-lifecycle",
		Agent:          "generic",
		Command:        client.Command{Path: faultagentBin, Args: []string{"--mode", "permission=execute"}},
		Cwd:            t.TempDir(),
		Env:            map[string]string{testmark.Env: mark},
		PermissionMode: "approve-reads",
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if r := s.Result(); r == nil || r.Session != s.ID() || !strings.HasPrefix(s.ID(), "s-") || r.Process.Pid == 0 {
		t.Fatalf("Open result = %+v", r)
	}

	var ups []client.Update
	res, err := s.Prompt(ctx, client.PromptParams{RequestID: "t1", Prompt: "run it"}, func(u client.Update) {
		ups = append(ups, u)
	})
	if err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	if res.RequestID != "t1" || res.Status != "completed" || res.StopReason != "end_turn" || res.Usage == nil {
		t.Fatalf("Prompt result = %+v", res)
	}
	mu.Lock()
	if len(asked) != 1 || asked[0].Session != s.ID() || asked[0].RequestID != "t1" || asked[0].Kind != "execute" || chosen == "" {
		t.Fatalf("permission requests = %+v (chosen %q)", asked, chosen)
	}
	mu.Unlock()
	if len(ups) == 0 {
		t.Fatal("no update reached the Prompt callback")
	}
	var texts []string
	for i, u := range ups {
		if u.Session != s.ID() || u.RequestID == nil || *u.RequestID != "t1" {
			t.Errorf("update %d = %+v, want session %s requestId t1", i, u, s.ID())
		}
		if i > 0 && u.Seq != ups[i-1].Seq+1 {
			t.Errorf("update %d has seq %d after %d (gap)", i, u.Seq, ups[i-1].Seq)
		}
		var chunk struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if u.Kind() == "agent_message_chunk" && json.Unmarshal(u.Update, &chunk) == nil {
			texts = append(texts, chunk.Content.Text)
		}
	}
	if want := "permission: selected " + chosen; !contains(texts, want) {
		t.Errorf("chunks %q lack %q", texts, want)
	}

	st, err := s.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.State != "open" || !st.Process.Alive || st.LastRequestID == nil || *st.LastRequestID != "t1" || st.Usage.Cumulative.TotalTokens == 0 {
		t.Fatalf("Status = %+v", st)
	}

	if pid := fmt.Sprint(s.Result().Process.Pid); !contains(markedLive(mark), pid) {
		t.Fatalf("the provider (pid %s) is not among the marked processes %v", pid, markedLive(mark))
	}
	proof, err := s.Close(ctx, client.CloseParams{Reason: "test done"})
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !proof.Complete || proof.Origin != "close" || proof.Reason != "test done" || proof.Session != s.ID() || !proof.Verified.TreeEmpty {
		t.Fatalf("proof = %+v", proof)
	}
	mu.Lock()
	if !hasDecision(decisions, "escalated") || !hasDecision(decisions, "approved") {
		t.Errorf("decisions = %+v, want escalated then approved", decisions)
	}
	mu.Unlock()

	if _, err := c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if code := c.ExitCode(); code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
	assertNoMarkedProcess(t, mark)
}

func TestErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := start(t, client.Options{})

	_, err := c.Attach("s-0123456789abcdef").Status(ctx)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != -32000 || ce.DataCode != "SESSION_NOT_FOUND" || ce.Retryable() {
		t.Fatalf("Status of an unknown session: %#v", err)
	}
	_, err = c.Attach("s-0123456789abcdef").Prompt(ctx, client.PromptParams{RequestID: "x", Prompt: "x"}, nil)
	if !errors.As(err, &ce) || ce.DataCode != "SESSION_NOT_FOUND" {
		t.Fatalf("Prompt of an unknown session: %#v", err)
	}

	_, err = c.Open(ctx, client.OpenParams{
		SessionKey: "bad", Agent: "generic", Command: client.Command{Path: "rel/x"}, Cwd: t.TempDir(),
	})
	if !errors.As(err, &ce) || ce.Code != -32602 || ce.DataCode != "INVALID_PARAMS" || ce.Field() != "command.path" {
		t.Fatalf("Open with a relative path: %#v", err)
	}
	if !strings.Contains(err.Error(), "INVALID_PARAMS") {
		t.Errorf("Error() = %q", err.Error())
	}

	_, err = c.Open(ctx, client.OpenParams{
		SessionKey: "missing", Agent: "generic", Command: client.Command{Path: "/nonexistent/agent"}, Cwd: t.TempDir(),
	})
	if !errors.As(err, &ce) || ce.DataCode != "COMMAND_NOT_EXECUTABLE" || ce.Proof() == nil || !ce.Proof().Complete {
		t.Fatalf("Open of a missing command: %#v", err)
	}

	// Concurrent requests on one Client.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.List(ctx); err != nil {
				t.Errorf("List: %v", err)
			}
		}()
	}
	wg.Wait()

	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := c.List(cctx); !errors.As(err, &ce) || ce.DataCode != client.DataCodeCancelled || !errors.Is(err, context.Canceled) {
		t.Fatalf("List with a cancelled ctx: %#v", err)
	}

	if _, err := c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := c.List(ctx); !errors.As(err, &ce) || ce.DataCode != client.DataCodeTransport {
		t.Fatalf("List after shutdown: %#v", err)
	}
}

func TestStartFailure(t *testing.T) {
	_, err := client.Start(context.Background(), client.Options{Binary: filepath.Join(t.TempDir(), "none")})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.DataCode != client.DataCodeStart {
		t.Fatalf("Start of a missing binary: %#v", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hasDecision(ds []client.PermissionDecision, decision string) bool {
	for _, d := range ds {
		if string(d.Decision) == decision {
			return true
		}
	}
	return false
}

// TestFrameTap: OnFrame sees every frame both ways in wire order, raw
// writes included; a malformed raw frame is answered (id null) without
// ending the connection; CloseInput makes the sidecar shut down and exit
// while the Client still reads.
func TestFrameTap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var frames []client.Frame
	c := start(t, client.Options{OnFrame: func(f client.Frame) {
		mu.Lock()
		frames = append(frames, f)
		mu.Unlock()
	}})
	if err := c.WriteRaw([]byte("{not json\n")); err != nil {
		t.Fatalf("WriteRaw: %v", err)
	}
	var raw json.RawMessage
	if err := c.Call(ctx, "session/list", map[string]any{}, &raw); err != nil || !strings.Contains(string(raw), `"sessions"`) {
		t.Fatalf("session/list after a malformed frame: %s, %v", raw, err)
	}
	if err := c.CloseInput(); err != nil {
		t.Fatalf("CloseInput: %v", err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the sidecar did not exit after stdin EOF")
	}
	if code := c.ExitCode(); code != 0 {
		t.Errorf("exit status after stdin EOF: %d, want 0", code)
	}
	if ps := c.ProcessState(); ps == nil || !ps.Exited() {
		t.Errorf("ProcessState = %v", ps)
	}

	mu.Lock()
	defer mu.Unlock()
	var sent, got []string
	for _, f := range frames {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(f.Data, &m)
		dir, list := "<-", &got
		if f.Sent {
			dir, list = "->", &sent
		}
		switch {
		case f.Raw:
			*list = append(*list, dir+" raw")
		case m.Method != "":
			*list = append(*list, dir+" "+m.Method)
		case m.Error != nil:
			*list = append(*list, fmt.Sprintf("%s error %s %d", dir, m.ID, m.Error.Code))
		default:
			*list = append(*list, dir+" result "+string(m.ID))
		}
	}
	// Each direction in wire order (the two interleave freely).
	if want := []string{"-> initialize", "-> raw", "-> session/list"}; strings.Join(sent, "; ") != strings.Join(want, "; ") {
		t.Errorf("frames sent: %q\nwant %q", sent, want)
	}
	if want := []string{"<- result 1", "<- error null -32700", "<- result 2"}; strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("frames read: %q\nwant %q", got, want)
	}
}
