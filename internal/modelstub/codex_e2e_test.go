package modelstub

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// e2eStep bounds one ACP exchange with the real agent. It is a deadline for
// an event, not a timed assertion: a healthy codex answers in well under a
// second; the bound only keeps a broken run from hanging the suite.
const e2eStep = 60 * time.Second

// rpcMsg is one newline-delimited JSON-RPC 2.0 message in either direction.
type rpcMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("rpc error %d: %s", e.Code, e.Message) }

// acpClient is a minimal single-threaded ACP client over a child's stdio:
// a reader goroutine turns stdout lines into messages, and call() consumes
// them in order until its own response arrives, answering agent requests
// through onRequest and keeping notifications for the test to inspect.
type acpClient struct {
	t      *testing.T
	stdin  interface{ Write([]byte) (int, error) }
	in     chan rpcMsg
	readMu sync.Mutex
	// readErr is set once the reader goroutine stops.
	readErr error
	nextID  int

	// notes holds every notification seen, in order.
	notes []rpcMsg
	// transcript holds every message both ways, "->" client to agent.
	transcript []string
	// onRequest answers an agent->client request: result or error.
	onRequest func(m rpcMsg) (any, *rpcError)
}

func newACPClient(t *testing.T, stdin interface{ Write([]byte) (int, error) }, stdout *bufio.Reader) (*acpClient, chan struct{}) {
	c := &acpClient{t: t, stdin: stdin, in: make(chan rpcMsg, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(c.in)
		for {
			line, err := stdout.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				var m rpcMsg
				if jerr := json.Unmarshal(line, &m); jerr != nil {
					c.readMu.Lock()
					c.transcript = append(c.transcript, "<- (not JSON) "+strings.TrimSpace(string(line)))
					c.readMu.Unlock()
				} else {
					c.readMu.Lock()
					c.transcript = append(c.transcript, "<- "+strings.TrimSpace(string(line)))
					c.readMu.Unlock()
					c.in <- m
				}
			}
			if err != nil {
				c.readMu.Lock()
				c.readErr = err
				c.readMu.Unlock()
				return
			}
		}
	}()
	return c, done
}

func (c *acpClient) send(m rpcMsg) {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		c.t.Fatalf("marshal: %v", err)
	}
	c.readMu.Lock()
	c.transcript = append(c.transcript, "-> "+string(b))
	c.readMu.Unlock()
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("write to agent: %v", err)
	}
}

// call sends a request and waits (up to e2eStep) for its response.
func (c *acpClient) call(method string, params any) (json.RawMessage, error) {
	c.nextID++
	id := json.RawMessage(strconv.Itoa(c.nextID))
	p, err := json.Marshal(params)
	if err != nil {
		c.t.Fatalf("marshal params: %v", err)
	}
	c.send(rpcMsg{ID: id, Method: method, Params: p})
	deadline := time.NewTimer(e2eStep)
	defer deadline.Stop()
	for {
		select {
		case m, ok := <-c.in:
			if !ok {
				c.readMu.Lock()
				rerr := c.readErr
				c.readMu.Unlock()
				return nil, fmt.Errorf("agent stdout closed while waiting for %s: %v", method, rerr)
			}
			switch {
			case m.Method != "" && len(m.ID) > 0:
				res, rerr := c.onRequestOrRefuse(m)
				out := rpcMsg{ID: m.ID}
				if rerr != nil {
					out.Error = rerr
				} else {
					b, err := json.Marshal(res)
					if err != nil {
						c.t.Fatalf("marshal result: %v", err)
					}
					out.Result = b
				}
				c.send(out)
			case m.Method != "":
				c.notes = append(c.notes, m)
			case bytes.Equal(m.ID, id):
				if m.Error != nil {
					return nil, m.Error
				}
				return m.Result, nil
			default:
				c.t.Logf("unexpected response id %s", m.ID)
			}
		case <-deadline.C:
			return nil, fmt.Errorf("no response to %s within %v", method, e2eStep)
		}
	}
}

func (c *acpClient) onRequestOrRefuse(m rpcMsg) (any, *rpcError) {
	if c.onRequest != nil {
		return c.onRequest(m)
	}
	return nil, &rpcError{Code: -32601, Message: "method not found"}
}

// sessionUpdate is the part of a session/update notification we inspect.
type sessionUpdate struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		SessionUpdate string `json:"sessionUpdate"`
		Content       struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Used   *int   `json:"used"`
		Status string `json:"status"`
	} `json:"update"`
}

// updatesSince decodes the session/update notifications from index i on.
func (c *acpClient) updatesSince(i int) []sessionUpdate {
	var out []sessionUpdate
	for _, n := range c.notes[i:] {
		if n.Method != "session/update" {
			continue
		}
		var u sessionUpdate
		if err := json.Unmarshal(n.Params, &u); err != nil {
			c.t.Fatalf("session/update params: %v", err)
		}
		out = append(out, u)
	}
	return out
}

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
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
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

	c, readerDone := newACPClient(t, stdin, bufio.NewReaderSize(stdout, 1<<16))
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
		<-readerDone
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
			c.readMu.Lock()
			data := strings.Join(c.transcript, "\n") + "\n"
			c.readMu.Unlock()
			if err := os.WriteFile(out, []byte(data), 0o644); err != nil {
				t.Errorf("transcript: %v", err)
			}
		}
		c.readMu.Lock()
		all := strings.Join(c.transcript, "\n")
		c.readMu.Unlock()
		if strings.Contains(all, apiKey) || strings.Contains(stderr.String(), apiKey) {
			t.Errorf("the API key appeared in the ACP transcript or agent stderr")
		}
		if t.Failed() {
			t.Logf("agent stderr:\n%s", stderr.String())
		}
	}
	defer cleanup()

	mustCall := func(method string, params any) json.RawMessage {
		t.Helper()
		res, err := c.call(method, params)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return res
	}

	// Handshake.
	initRes := mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
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
	mustCall("authenticate", map[string]any{"methodId": "openai-api-key"})
	newRes := mustCall("session/new", map[string]any{"cwd": work, "mcpServers": []any{}})
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
	mark := len(c.notes)
	res := mustCall("session/prompt", map[string]any{
		"sessionId": sess.SessionID,
		"prompt":    []any{map[string]any{"type": "text", "text": "say hello"}},
	})
	assertStop(t, res, "end_turn")
	var text strings.Builder
	sawUsage := false
	for _, u := range c.updatesSince(mark) {
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
	c.onRequest = func(m rpcMsg) (any, *rpcError) {
		if m.Method != "session/request_permission" {
			return nil, &rpcError{Code: -32601, Message: "method not found"}
		}
		permReq = m.Params
		var p struct {
			ToolCall struct {
				Kind string `json:"kind"`
			} `json:"toolCall"`
			Options []struct {
				OptionID string `json:"optionId"`
				Kind     string `json:"kind"`
			} `json:"options"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, &rpcError{Code: -32602, Message: err.Error()}
		}
		for _, o := range p.Options {
			if o.Kind == "allow_once" {
				return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": o.OptionID}}, nil
			}
		}
		t.Errorf("permission request without allow_once: %s", m.Params)
		return map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}, nil
	}
	mark = len(c.notes)
	res = mustCall("session/prompt", map[string]any{
		"sessionId": sess.SessionID,
		"prompt":    []any{map[string]any{"type": "text", "text": "run: echo hi > made.txt"}},
	})
	assertStop(t, res, "end_turn")
	if permReq == nil {
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
	for _, u := range c.updatesSince(mark) {
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
