package modelstub

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// e2eStep bounds one ACP exchange with the real agent. It is a deadline for
// an event, not a timed assertion: a healthy codex answers in well under a
// second; the bound only keeps a broken run from hanging the suite.
const e2eStep = 60 * time.Second

func randHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// repoRoot walks up from the package directory to the one holding go.mod.
func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// markedPIDs lists live (non-zombie) processes whose environment holds
// marker (an exact "KEY=VALUE" entry) or whose cwd is under workspace
// (leaks are found by marker, not by name).
func markedPIDs(marker, workspace string) []int {
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// state is the first field after the ")" closing comm.
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
			continue
		}
		hit := false
		if env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil {
			for _, kv := range bytes.Split(env, []byte{0}) {
				if string(kv) == marker {
					hit = true
					break
				}
			}
		}
		if !hit && workspace != "" {
			if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil &&
				(cwd == workspace || strings.HasPrefix(cwd, workspace+"/")) {
				hit = true
			}
		}
		if hit {
			out = append(out, pid)
		}
	}
	return out
}

// reapOrphans collects zombies re-parented to this (subreaper) process,
// by pid, leaving children that exec.Cmd still owns alone.
func reapOrphans(skip int) {
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == skip {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) {
			continue
		}
		f := strings.Fields(string(stat[i+2:]))
		if len(f) < 2 || f[0] != "Z" || f[1] != strconv.Itoa(self) {
			continue
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}

// TestCodexACP_RealAgentAgainstLoopbackModel drives the pinned real
// codex-acp (node launcher + Rust binary) against the in-process stub over
// raw ACP JSON-RPC: handshake, a text turn, a tool turn with a permission
// request, then kills its process group and proves by env marker that no
// process survives (docs/agents.md, Codex legacy).
func TestCodexACP_RealAgentAgainstLoopbackModel(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only (/proc scan)")
	}
	root := repoRoot(t)
	bin := filepath.Join(root, "node_modules", "@zed-industries", "codex-acp", "bin", "codex-acp.js")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("codex-acp not installed (%v); run `npm ci` at the repo root", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not on PATH")
	}

	// Orphans of the process group (the Rust binary once the launcher dies)
	// re-parent to us instead of PID 1, which never reaps (common.md).
	if err := reaper.BecomeSubreaper(); err != nil {
		t.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
	}

	stub := New(t.Logf)
	srv := httptest.NewServer(stub)
	defer srv.Close()

	tmp := t.TempDir()
	codexHome := filepath.Join(tmp, "codex-home")
	work := filepath.Join(tmp, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteCodexHome(codexHome, srv.URL); err != nil {
		t.Fatal(err)
	}
	apiKey := "sk-test-" + randHex(t, 12)
	marker := testmark.Env + "=" + testmark.New()

	cmd := exec.Command(bin)
	cmd.Dir = work
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + tmp,
		"CODEX_HOME=" + codexHome,
		"OPENAI_API_KEY=" + apiKey,
		"RUST_LOG=warn",
		marker,
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	h := &acpHost{}
	conn := acp.NewClientSideConnection(h, recorder{h, "-> ", stdin}, io.TeeReader(stdout, recorder{h: h, prefix: "<- "}))
	conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancelCtx := context.WithCancel(context.Background())
	defer cancelCtx()
	cleanedUp := false
	cleanup := func() {
		if cleanedUp {
			return
		}
		cleanedUp = true
		_ = stdin.Close()
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-waited
		}
		select {
		case <-conn.Done():
		case <-time.After(e2eStep):
			t.Errorf("the ACP connection did not end after the agent exited")
		}
		// Descendants in other sessions/groups are found by marker only.
		deadline := time.Now().Add(10 * time.Second)
		var left []int
		for {
			reapOrphans(pgid)
			left = markedPIDs(marker, work)
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(20 * time.Millisecond) // poll interval of the deadline loop
		}
		reapOrphans(pgid)
		if len(left) > 0 {
			t.Errorf("processes survived the kill (marker %s): %v", marker, left)
		}
		if out := os.Getenv("MODELSTUB_TRANSCRIPT_OUT"); out != "" {
			h.mu.Lock()
			data := strings.Join(h.transcript, "\n") + "\n"
			h.mu.Unlock()
			if err := os.WriteFile(out, []byte(data), 0o644); err != nil {
				t.Errorf("transcript: %v", err)
			}
		}
		h.mu.Lock()
		all := strings.Join(h.transcript, "\n")
		h.mu.Unlock()
		if strings.Contains(all, apiKey) || strings.Contains(stderr.String(), apiKey) {
			t.Errorf("the API key appeared in the ACP transcript or agent stderr")
		}
		if t.Failed() {
			t.Logf("agent stderr:\n%s", stderr.String())
		}
	}
	defer cleanup()

	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, e2eStep) }
	must := func(what string, v any, err error) json.RawMessage {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return asJSON(t, v)
	}

	// Handshake.
	sctx, done := step()
	initResp, err := conn.Initialize(sctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	done()
	initRes := must("initialize", initResp, err)
	var init struct {
		ProtocolVersion int `json:"protocolVersion"`
		AgentInfo       struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"agentInfo"`
		AuthMethods []struct {
			ID string `json:"id"`
		} `json:"authMethods"`
	}
	if err := json.Unmarshal(initRes, &init); err != nil {
		t.Fatal(err)
	}
	if init.ProtocolVersion != 1 || init.AgentInfo.Name != "codex-acp" || init.AgentInfo.Version != "0.16.0" {
		t.Fatalf("initialize result: %s", initRes)
	}
	hasKeyAuth := false
	for _, m := range init.AuthMethods {
		hasKeyAuth = hasKeyAuth || m.ID == "openai-api-key"
	}
	if !hasKeyAuth {
		t.Fatalf("no openai-api-key auth method: %s", initRes)
	}
	sctx, done = step()
	_, err = conn.Authenticate(sctx, acp.AuthenticateRequest{MethodId: "openai-api-key"})
	done()
	must("authenticate", nil, err)
	sctx, done = step()
	newResp, err := conn.NewSession(sctx, acp.NewSessionRequest{Cwd: work, McpServers: []acp.McpServer{}})
	done()
	newRes := must("session/new", newResp, err)
	var sess struct {
		SessionID string `json:"sessionId"`
		Models    struct {
			CurrentModelID string `json:"currentModelId"`
		} `json:"models"`
		Modes struct {
			CurrentModeID string `json:"currentModeId"`
		} `json:"modes"`
		ConfigOptions []struct {
			ID           string `json:"id"`
			Category     string `json:"category"`
			CurrentValue string `json:"currentValue"`
		} `json:"configOptions"`
	}
	if err := json.Unmarshal(newRes, &sess); err != nil {
		t.Fatal(err)
	}
	// Observed with a custom model_provider: no `models` field; the model
	// is the configOption of category "model" (codex-transcript.md).
	modelOpt := ""
	for _, o := range sess.ConfigOptions {
		if o.Category == "model" {
			modelOpt = o.CurrentValue
		}
	}
	if sess.SessionID == "" || sess.Modes.CurrentModeID != "read-only" || (modelOpt == "" && sess.Models.CurrentModelID == "") {
		t.Fatalf("session/new result lacks sessionId/modes/model: %s", newRes)
	}

	// Turn 1: plain text.
	prompt := func(text string) json.RawMessage {
		t.Helper()
		sctx, done := step()
		defer done()
		resp, err := conn.Prompt(sctx, acp.PromptRequest{SessionId: acp.SessionId(sess.SessionID), Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		return must("session/prompt", resp, err)
	}
	mark := h.noteCount()
	res := prompt("say hello")
	assertStop(t, res, "end_turn")
	var text strings.Builder
	sawUsage := false
	for _, u := range h.updatesSince(t, mark) {
		switch u.Update.SessionUpdate {
		case "agent_message_chunk":
			text.WriteString(u.Update.Content.Text)
		case "usage_update":
			sawUsage = true
		}
	}
	if text.String() != HelloText {
		t.Errorf("turn 1 agent text = %q, want %q", text.String(), HelloText)
	}
	if !sawUsage {
		t.Errorf("turn 1: no usage_update")
	}

	// Turn 2: a tool call that needs permission.
	var permReq json.RawMessage
	var permMu sync.Mutex
	h.mu.Lock()
	h.onPermission = func(params json.RawMessage) acp.RequestPermissionOutcome {
		permMu.Lock()
		permReq = params
		permMu.Unlock()
		var p struct {
			Options []struct {
				OptionID string `json:"optionId"`
				Kind     string `json:"kind"`
			} `json:"options"`
		}
		_ = json.Unmarshal(params, &p)
		for _, o := range p.Options {
			if o.Kind == "allow_once" {
				return acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(o.OptionID))
			}
		}
		t.Errorf("permission request without allow_once: %s", params)
		return acp.NewRequestPermissionOutcomeCancelled()
	}
	h.mu.Unlock()
	mark = h.noteCount()
	res = prompt("run: echo hi > made.txt")
	assertStop(t, res, "end_turn")
	permMu.Lock()
	asked := permReq != nil
	permMu.Unlock()
	if !asked {
		t.Fatalf("no session/request_permission during the tool turn")
	}
	made, err := os.ReadFile(filepath.Join(work, "made.txt"))
	if err != nil {
		t.Fatalf("made.txt: %v", err)
	}
	if string(made) != "hi\n" {
		t.Errorf("made.txt = %q, want %q", made, "hi\n")
	}
	text.Reset()
	var statuses []string
	for _, u := range h.updatesSince(t, mark) {
		switch u.Update.SessionUpdate {
		case "agent_message_chunk":
			text.WriteString(u.Update.Content.Text)
		case "tool_call", "tool_call_update":
			statuses = append(statuses, u.Update.SessionUpdate+":"+u.Update.Status)
		}
	}
	if text.String() != DoneText {
		t.Errorf("turn 2 agent text = %q, want %q", text.String(), DoneText)
	}
	if !containsStr(statuses, "tool_call_update:completed") {
		t.Errorf("turn 2 tool statuses = %v, want a completed tool_call_update", statuses)
	}
	st := stub.Stats()
	if st.ByKind[KindText] < 1 || st.ByKind[KindFunctionCall] != 1 || st.ByKind[KindToolResult] != 1 {
		t.Errorf("stub stats = %+v", st)
	}
	if len(st.Commands) != 1 || st.Commands[0] != "echo hi > made.txt" {
		t.Errorf("stub commands = %v", st.Commands)
	}

	// The launcher and the Rust binary both carry the marker: two processes
	// to kill (docs/agents.md, Codex legacy).
	sawRust := false
	live := markedPIDs(marker, "")
	for _, pid := range live {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil &&
			strings.Contains(exe, "codex-acp-linux-") {
			sawRust = true
		}
	}
	if len(live) < 2 || !sawRust {
		t.Errorf("marked processes before kill = %v, want the node launcher and the Rust binary", live)
	}

	cleanup()
}

func assertStop(t *testing.T, res json.RawMessage, want string) {
	t.Helper()
	var r struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatalf("prompt result: %v", err)
	}
	if r.StopReason != want {
		t.Fatalf("stopReason = %q, want %q (result %s)", r.StopReason, want, res)
	}
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// lockedBuffer is a bytes.Buffer safe for the exec copier and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
