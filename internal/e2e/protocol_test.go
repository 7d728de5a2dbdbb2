package e2e

// Protocol-conformance tests: each drives the built acpx-sidecar with the
// fault agent (cmd/faultagent) as a "generic" provider and checks one rule
// of PROTOCOL.md on the wire, on disk and in the process table.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// faultEnv is one test's workspace: a state dir, a cwd for the provider
// and the ACPX_TEST_MARK value every process of the test carries.
type faultEnv struct {
	stateDir string
	work     string
	mark     string
}

// newFaultEnv makes a workspace. Call it before startSidecar: its cleanup
// then runs after the sidecar's, and SIGKILLs (by pid) any process of this
// test that still carries the marker, so a failing test leaks nothing on a
// machine whose PID 1 does not reap.
func newFaultEnv(t *testing.T) *faultEnv {
	t.Helper()
	e := &faultEnv{stateDir: t.TempDir(), work: t.TempDir(), mark: testmark.New()}
	t.Cleanup(func() {
		for _, pid := range markedPids(e.mark, e.work) {
			t.Logf("killing leftover marked pid %d", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return e
}

// command is the session/open command for the fault agent with modes.
func (e *faultEnv) command(modes string) map[string]any {
	if modes == "" {
		modes = "normal"
	}
	return map[string]any{"path": faultBin, "args": []string{"--mode", modes}}
}

// openParams are valid session/open params for the fault agent.
func (e *faultEnv) openParams(key, modes string) map[string]any {
	return map[string]any{"sessionKey": key, "agent": "generic", "command": e.command(modes),
		"cwd": e.work, "stateDir": e.stateDir, "env": map[string]string{"ACPX_TEST_MARK": e.mark}}
}

// open opens a fault-agent session and fails the test on an error.
func (e *faultEnv) open(s *sidecar, key, modes string) openResult {
	s.t.Helper()
	var o openResult
	s.mustCall("session/open", e.openParams(key, modes), &o)
	if o.Session == "" {
		s.t.Fatalf("session/open returned no session id")
	}
	return o
}

// recordPath is where the sidecar keeps sessionKey's record (PROTOCOL §4).
func (e *faultEnv) recordPath(key string) string {
	return filepath.Join(e.stateDir, "sessions", strings.ReplaceAll(url.QueryEscape(key), "+", "%20")+".json")
}

// errData is the `data` of a sidecar error (PROTOCOL §3).
type errData struct {
	Code      string `json:"code"`
	Retryable *bool  `json:"retryable"`
	Field     string `json:"field"`
	Supported []int  `json:"supported"`
	Cleanup   *proof `json:"cleanup"`
	Proof     *proof `json:"proof"`
}

// wantError fails unless f is an error with rpcCode and (if dataCode is
// not empty) data.code; it returns the decoded data.
func wantError(t testing.TB, what string, f *frame, rpcCode int, dataCode string) errData {
	t.Helper()
	if f.Error == nil {
		t.Fatalf("%s: got result %s, want error %d %s", what, truncate(string(f.Result), 400), rpcCode, dataCode)
	}
	var d errData
	if len(f.Error.Data) > 0 {
		if err := json.Unmarshal(f.Error.Data, &d); err != nil {
			t.Fatalf("%s: error data %s: %v", what, f.Error.Data, err)
		}
	}
	if f.Error.Code != rpcCode || (dataCode != "" && d.Code != dataCode) {
		t.Fatalf("%s: got error %d %q data %s, want %d data.code %q", what, f.Error.Code, f.Error.Message, f.Error.Data, rpcCode, dataCode)
	}
	if d.Retryable == nil {
		t.Errorf("%s: error data has no boolean retryable (PROTOCOL §3): %s", what, f.Error.Data)
	}
	return d
}

// turnResult is a session/prompt result (PROTOCOL §4).
type turnResult struct {
	RequestID  string `json:"requestId"`
	Status     string `json:"status"`
	StopReason string `json:"stopReason"`
	Error      *struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Retryable bool   `json:"retryable"`
	} `json:"error"`
}

func decodeResult[T any](t testing.TB, what string, f *frame) T {
	t.Helper()
	var v T
	if f.Error != nil {
		t.Fatalf("%s failed: %d %s %s", what, f.Error.Code, f.Error.Message, f.Error.Data)
	}
	if err := json.Unmarshal(f.Result, &v); err != nil {
		t.Fatalf("%s result %s: %v", what, truncate(string(f.Result), 400), err)
	}
	return v
}

// closeProof closes session and returns the proof of its reply.
func closeProof(s *sidecar, session string, extra map[string]any) proof {
	s.t.Helper()
	p := map[string]any{"session": session, "reason": "e2e"}
	for k, v := range extra {
		p[k] = v
	}
	var res struct {
		Proof proof `json:"proof"`
	}
	s.mustCall("session/close", p, &res)
	return res.Proof
}

// sendRawAwait clears any stored reply under the given ids, writes raw and
// waits for a reply under any of them (ids are raw JSON: `null`, `"x"`, `7`).
func (s *sidecar) sendRawAwait(raw []byte, ids ...string) *frame {
	s.t.Helper()
	s.mu.Lock()
	for _, id := range ids {
		delete(s.replies, id)
	}
	s.mu.Unlock()
	s.sendRaw(raw)
	var got *frame
	s.waitFor(20*time.Second, "reply to a raw frame under ids "+strings.Join(ids, " "), func() bool {
		for _, id := range ids {
			if f := s.replies[id]; f != nil {
				got = f
				return true
			}
		}
		return false
	})
	return got
}

// cancelRequest sends `$/cancelRequest` for the request id key returned by
// start (a decimal number).
func (s *sidecar) cancelRequest(id string) {
	n, err := strconv.Atoi(id)
	if err != nil {
		s.t.Fatalf("request id %q is not numeric", id)
	}
	s.send(map[string]any{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": map[string]any{"id": n}})
}

// waitTurnUpdate waits for a session/update of session carrying requestId.
func (s *sidecar) waitTurnUpdate(session, requestID string) {
	s.t.Helper()
	s.waitNote("session/update", 20*time.Second, func(p json.RawMessage) bool {
		var u updateNote
		return json.Unmarshal(p, &u) == nil && u.Session == session && u.RequestID != nil && *u.RequestID == requestID
	})
}

// waitMarked waits until at least one live process carries mark.
func waitMarked(t testing.TB, mark string, d time.Duration) []int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if pids := markedPids(mark, ""); len(pids) > 0 {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process carries the marker after %v", d)
		}
		time.Sleep(20 * time.Millisecond) // polling the process table, bounded by d
	}
}

// exitStatus waits (bounded) for the sidecar to exit and returns its status.
func (s *sidecar) exitStatus(d time.Duration) int {
	s.t.Helper()
	select {
	case <-s.exited:
	case <-time.After(d):
		s.t.Fatalf("sidecar did not exit within %v\nstderr:\n%s", d, s.stderrText())
	}
	if ee, ok := s.exitErr.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if s.exitErr != nil {
		s.t.Fatalf("sidecar wait: %v", s.exitErr)
	}
	return 0
}

func listSessions(s *sidecar) []map[string]any {
	s.t.Helper()
	var res struct {
		Sessions []map[string]any `json:"sessions"`
	}
	s.mustCall("session/list", map[string]any{}, &res)
	if res.Sessions == nil {
		s.t.Fatalf("session/list result has no sessions array")
	}
	return res.Sessions
}

// ---------------------------------------------------------------- lifecycle

// TestProtocol_RequestBeforeInitializeIsNotInitialized: any request before
// initialize gets -32002; a notification before it is dropped (PROTOCOL §2.1).
func TestProtocol_RequestBeforeInitializeIsNotInitialized(t *testing.T) {
	s := startSidecar(t, "--state-dir", t.TempDir())
	s.send(map[string]any{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": map[string]any{"id": 1}})
	wantError(t, "session/list before initialize", s.call("session/list", map[string]any{}), -32002, "")
	wantError(t, "session/open before initialize", s.call("session/open", map[string]any{}), -32002, "")
	s.initialize(false)
	listSessions(s)
}

// TestProtocol_SecondInitializeIsInvalidRequest: a second initialize gets
// -32600 (PROTOCOL §2.1).
func TestProtocol_SecondInitializeIsInvalidRequest(t *testing.T) {
	s := startSidecar(t, "--state-dir", t.TempDir())
	res := s.initialize(false)
	if v, _ := res["protocolVersion"].(float64); v != 1 {
		t.Errorf("initialize protocolVersion %v, want 1", res["protocolVersion"])
	}
	f := s.call("initialize", map[string]any{"protocolVersion": 1, "clientInfo": map[string]string{"name": "e2e", "version": "0"}})
	wantError(t, "second initialize", f, -32600, "")
	listSessions(s)
}

// TestProtocol_UnsupportedProtocolVersion: initialize with a version other
// than 1 gets -32602 with data.supported [1] (PROTOCOL §2 initialize); the
// connection stays uninitialized, so a correct initialize then succeeds.
func TestProtocol_UnsupportedProtocolVersion(t *testing.T) {
	s := startSidecar(t, "--state-dir", t.TempDir())
	f := s.call("initialize", map[string]any{"protocolVersion": 2, "clientInfo": map[string]string{"name": "e2e", "version": "0"}})
	d := wantError(t, "initialize v2", f, -32602, "")
	if len(d.Supported) != 1 || d.Supported[0] != 1 {
		t.Errorf("data.supported %v, want [1] (data %s)", d.Supported, f.Error.Data)
	}
	s.initialize(false)
	listSessions(s)
}

// TestProtocol_UnknownMethod: an unknown method gets -32601 (PROTOCOL §3).
func TestProtocol_UnknownMethod(t *testing.T) {
	s := startSidecar(t, "--state-dir", t.TempDir())
	s.initialize(false)
	wantError(t, "session/frobnicate", s.call("session/frobnicate", map[string]any{}), -32601, "")
	listSessions(s)
}

// ------------------------------------------------------------------ framing

// TestFraming_MalformedFrameKeepsConnection: malformed JSON (-32700), a
// batch (-32600), an object without "jsonrpc" (-32600) and a frame over
// --max-frame-bytes (-32600) are each answered with an error (id null where
// no id could be read), discarded, and the connection keeps working
// (PROTOCOL §1). A \r\n-terminated line is accepted.
func TestFraming_MalformedFrameKeepsConnection(t *testing.T) {
	s := startSidecar(t, "--state-dir", t.TempDir(), "--max-frame-bytes", "4096")
	init := s.initialize(false)
	if caps, _ := init["capabilities"].(map[string]any); caps["maxFrameBytes"] != float64(4096) {
		t.Errorf("initialize capabilities.maxFrameBytes %v, want 4096", caps["maxFrameBytes"])
	}

	f := s.sendRawAwait([]byte("{bad json\n"), "null")
	wantError(t, "malformed JSON", f, -32700, "")
	listSessions(s)

	f = s.sendRawAwait([]byte(`[{"jsonrpc":"2.0","id":"batch-1","method":"session/list","params":{}}]`+"\n"), "null", `"batch-1"`)
	if string(f.ID) != "null" {
		t.Errorf("batch answered under id %s, want null", f.ID)
	}
	wantError(t, "batch", f, -32600, "")
	listSessions(s)

	f = s.sendRawAwait([]byte(`{"id":"nojr","method":"session/list","params":{}}`+"\n"), "null", `"nojr"`)
	wantError(t, "object without jsonrpc", f, -32600, "")
	listSessions(s)

	big := `{"jsonrpc":"2.0","id":"big","method":"session/list","params":{"pad":"` + strings.Repeat("x", 10<<10) + `"}}` + "\n"
	f = s.sendRawAwait([]byte(big), "null", `"big"`)
	if string(f.ID) != "null" {
		t.Errorf("oversized frame answered under id %s, want null", f.ID)
	}
	wantError(t, "10 KiB frame over --max-frame-bytes 4096", f, -32600, "")
	listSessions(s)

	f = s.sendRawAwait([]byte(`{"jsonrpc":"2.0","id":"crlf","method":"session/list","params":{}}`+"\r\n"), `"crlf"`)
	decodeResult[map[string]any](t, "CRLF-terminated session/list", f)

	s.mu.Lock()
	for _, id := range []string{`"batch-1"`, `"big"`} {
		if r := s.replies[id]; r != nil && r.Result != nil {
			t.Errorf("a discarded frame was executed: result under id %s", id)
		}
	}
	s.mu.Unlock()
}

// lspPeer is a sidecar started with --framing=lsp and a Content-Length
// reader (the ndjson harness cannot read LSP frames).
type lspPeer struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	frames chan []byte
	stderr bytes.Buffer
	done   chan struct{}
}

func startLSPSidecar(t *testing.T, args ...string) *lspPeer {
	t.Helper()
	p := &lspPeer{t: t, frames: make(chan []byte, 64), done: make(chan struct{})}
	p.cmd = exec.Command(sidecarBin, append([]string{"--framing=lsp"}, args...)...)
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r := bufio.NewReader(out)
		for {
			body, err := readLSPFrame(r)
			if err != nil {
				if err != io.EOF {
					p.frames <- []byte("READ ERROR: " + err.Error())
				}
				break
			}
			p.frames <- body
		}
		close(p.frames)
		_, _ = io.Copy(io.Discard, r)
		_ = p.cmd.Wait() // only after stdout is drained (StdoutPipe contract)
		close(p.done)
	}()
	t.Cleanup(func() {
		go func() {
			for range p.frames { // unblock the reader so that it can reach Wait
			}
		}()
		_ = p.stdin.Close()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("lsp sidecar did not exit after stdin EOF")
		}
	})
	return p
}

// readLSPFrame reads one `Content-Length: N\r\n...\r\n\r\n<N bytes>` frame.
func readLSPFrame(r *bufio.Reader) ([]byte, error) {
	n := -1
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" && n == -1 {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("header: %v (read %q)", err, line)
		}
		if !strings.HasSuffix(line, "\r\n") {
			return nil, fmt.Errorf("header line not CRLF-terminated: %q", line)
		}
		line = strings.TrimSuffix(line, "\r\n")
		if line == "" {
			break
		}
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("bad header line %q", line)
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			if n, err = strconv.Atoi(strings.TrimSpace(val)); err != nil || n < 0 {
				return nil, fmt.Errorf("bad Content-Length %q", val)
			}
		}
	}
	if n < 0 {
		return nil, fmt.Errorf("frame without Content-Length")
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("body: %v", err)
	}
	return body, nil
}

func (p *lspPeer) write(body string, extraHeader string) {
	p.t.Helper()
	if _, err := fmt.Fprintf(p.stdin, "Content-Length: %d\r\n%s\r\n%s", len(body), extraHeader, body); err != nil {
		p.t.Fatalf("write: %v", err)
	}
}

// next returns the next frame that is a response (notifications skipped).
func (p *lspPeer) next(d time.Duration) *frame {
	p.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case b, ok := <-p.frames:
			if !ok {
				p.t.Fatalf("lsp sidecar closed stdout; stderr:\n%s", truncate(p.stderrSafe(), 4000))
			}
			f := &frame{}
			if err := json.Unmarshal(b, f); err != nil {
				p.t.Fatalf("lsp frame is not JSON: %q", truncate(string(b), 300))
			}
			if f.Method == "" {
				return f
			}
		case <-timeout:
			p.t.Fatalf("no lsp frame within %v", d)
		}
	}
}

func (p *lspPeer) stderrSafe() string {
	select {
	case <-p.done:
		return p.stderr.String()
	default:
		return "(still running)"
	}
}

// TestFraming_LSPContentLengthRoundTrip: with --framing=lsp the sidecar
// reads and writes `Content-Length` frames (PROTOCOL §1): initialize and
// session/list round-trip (a Content-Type header is accepted as in LSP),
// a malformed body gets -32700 id null and the connection keeps working,
// and stdin EOF ends the process with status 0.
func TestFraming_LSPContentLengthRoundTrip(t *testing.T) {
	p := startLSPSidecar(t, "--state-dir", t.TempDir())
	p.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"e2e","version":"0"}}}`, "")
	f := p.next(20 * time.Second)
	if string(f.ID) != "1" {
		t.Fatalf("initialize reply id %s", f.ID)
	}
	init := decodeResult[map[string]any](t, "lsp initialize", f)
	if caps, _ := init["capabilities"].(map[string]any); caps["framing"] != "lsp" {
		t.Errorf("initialize capabilities.framing %v, want lsp", caps["framing"])
	}

	p.write(`{"jsonrpc":"2.0","id":"l2","method":"session/list","params":{}}`, "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n")
	f = p.next(20 * time.Second)
	if string(f.ID) != `"l2"` {
		t.Fatalf("session/list reply id %s", f.ID)
	}
	if l := decodeResult[map[string]any](t, "lsp session/list", f); l["sessions"] == nil {
		t.Errorf("session/list result %s", f.Result)
	}

	p.write(`{bad json`, "")
	f = p.next(20 * time.Second)
	if string(f.ID) != "null" {
		t.Errorf("malformed lsp body answered under id %s, want null", f.ID)
	}
	wantError(t, "malformed lsp body", f, -32700, "")

	p.write(`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`, "")
	f = p.next(20 * time.Second)
	if string(f.ID) != "3" {
		t.Fatalf("session/list reply id %s", f.ID)
	}
	decodeResult[map[string]any](t, "lsp session/list after a bad frame", f)

	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("lsp sidecar did not exit after stdin EOF")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after stdin EOF with no sessions, want 0", code)
	}
}

// ------------------------------------------------------------------- params

// TestParams_InvalidFieldsNamed: invalid params get -32602 with data.field
// naming the first bad field as a dot path (PROTOCOL §3, §4 session/open,
// session/prompt); domain rejections of the command carry -32000 and their
// data.code (UNKNOWN_AGENT, COMMAND_NOT_EXECUTABLE, COMMAND_DIGEST_MISMATCH);
// a matching command.sha256 opens fine.
func TestParams_InvalidFieldsNamed(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)

	notExec := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		mutate func(p map[string]any)
		field  string
	}{
		{"missing sessionKey", func(p map[string]any) { delete(p, "sessionKey") }, "sessionKey"},
		{"relative command.path", func(p map[string]any) { p["command"] = map[string]any{"path": "faultagent"} }, "command.path"},
		{"cwd does not exist", func(p map[string]any) { p["cwd"] = filepath.Join(e.work, "no-such-dir") }, "cwd"},
		{"permissionMode x", func(p map[string]any) { p["permissionMode"] = "x" }, "permissionMode"},
		{"sessionKey is a number", func(p map[string]any) { p["sessionKey"] = 5 }, "sessionKey"},
		{"command.path is a number", func(p map[string]any) { p["command"] = map[string]any{"path": 5} }, "command.path"},
	}
	for _, c := range cases {
		p := e.openParams("params-"+randHex(4), "")
		c.mutate(p)
		d := wantError(t, "session/open "+c.name, s.call("session/open", p), -32602, "")
		if d.Field != c.field {
			t.Errorf("session/open %s: data.field %q, want %q", c.name, d.Field, c.field)
		}
	}
	d := wantError(t, `session/prompt requestId ""`,
		s.call("session/prompt", map[string]any{"session": "s-none", "requestId": "", "prompt": "hi"}), -32602, "")
	if d.Field != "requestId" {
		t.Errorf(`session/prompt requestId "": data.field %q, want "requestId"`, d.Field)
	}

	p := e.openParams("params-agent", "")
	p["agent"] = "no-such-agent"
	wantError(t, "unknown agent", s.call("session/open", p), -32000, "UNKNOWN_AGENT")

	p = e.openParams("params-noexec", "")
	p["command"] = map[string]any{"path": notExec}
	wantError(t, "non-executable command", s.call("session/open", p), -32000, "COMMAND_NOT_EXECUTABLE")

	p = e.openParams("params-digest-bad", "")
	p["command"] = map[string]any{"path": faultBin, "args": []string{"--mode", "normal"}, "sha256": strings.Repeat("0", 64)}
	wantError(t, "sha256 mismatch", s.call("session/open", p), -32000, "COMMAND_DIGEST_MISMATCH")
	if left := markedPids(e.mark, ""); len(left) != 0 {
		t.Errorf("processes launched despite rejected opens: %v", left)
	}

	bin, err := os.ReadFile(faultBin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	p = e.openParams("params-digest-ok", "")
	p["command"] = map[string]any{"path": faultBin, "args": []string{"--mode", "normal"}, "sha256": hex.EncodeToString(sum[:])}
	o := decodeResult[openResult](t, "open with matching sha256", s.call("session/open", p))
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "hi"}, &res)
	if res.Status != "completed" {
		t.Errorf("turn on the digest-verified session: %+v", res)
	}
	if pr := closeProof(s, o.Session, nil); !pr.Complete {
		t.Errorf("close proof not complete: %+v", pr)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// ------------------------------------------------------------------- stream

// TestStream_FloodOf20000UpdatesLosesNothing: 20000 unpaced updates of one
// turn all arrive, in the agent's order, with seq 1..N gap-free and the
// turn's requestId, before the turn's result (PROTOCOL §4 session/prompt,
// §5 session/update).
func TestStream_FloodOf20000UpdatesLosesNothing(t *testing.T) {
	const n = 20000
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "flood", fmt.Sprintf("flood=%d", n))
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "flood"}, &res)
	// The reader stores frames in wire order, so every update sent before
	// the result is already recorded here.
	ups := updatesOf(s, o.Session)
	if res.Status != "completed" || res.RequestID != "t1" {
		t.Errorf("turn result %+v, want completed t1", res)
	}
	if len(ups) < n+1 {
		t.Fatalf("%d updates before the result, want at least %d", len(ups), n+1)
	}
	flood := 0
	for i, u := range ups {
		if u.Seq != uint64(i+1) {
			t.Fatalf("update %d has seq %d, want %d (gap or reorder)", i, u.Seq, i+1)
		}
		if u.RequestID == nil || *u.RequestID != "t1" {
			t.Fatalf("update seq %d has requestId %v, want t1", u.Seq, u.RequestID)
		}
		var c struct {
			Kind    string `json:"sessionUpdate"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(u.Update, &c); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(c.Content.Text, "flood ") {
			if want := fmt.Sprintf("flood %d;", flood); c.Content.Text != want {
				t.Fatalf("update seq %d text %q, want %q (lost or reordered)", u.Seq, c.Content.Text, want)
			}
			flood++
		}
	}
	if flood != n {
		t.Errorf("%d flood chunks arrived, want %d", flood, n)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestStream_TwelveMegabyteUpdateArrivesWhole: a 12 MiB agent_message_chunk
// (larger than any default line buffer) is forwarded whole and verbatim,
// and the connection keeps working: a second turn completes (PROTOCOL §5
// "update is the ACP SessionUpdate verbatim").
func TestStream_TwelveMegabyteUpdateArrivesWhole(t *testing.T) {
	const size = 12582912
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "long-line", fmt.Sprintf("long-line=%d", size))
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "long"}, &res)
	if res.Status != "completed" {
		t.Fatalf("turn result %+v", res)
	}
	found := 0
	for _, u := range updatesOf(s, o.Session) {
		if len(u.Update) < size {
			continue
		}
		var c struct {
			Kind    string `json:"sessionUpdate"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(u.Update, &c); err != nil {
			t.Fatal(err)
		}
		if c.Kind != "agent_message_chunk" {
			t.Errorf("large update kind %q", c.Kind)
		}
		if len(c.Content.Text) != size {
			t.Errorf("large chunk text is %d bytes, want %d", len(c.Content.Text), size)
		}
		if strings.Trim(c.Content.Text, "x") != "" {
			t.Errorf("large chunk text is not all 'x' as the agent sent it")
		}
		found++
	}
	if found != 1 {
		t.Fatalf("%d updates of >= %d bytes, want exactly 1", found, size)
	}
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "again"}, &res)
	if res.Status != "completed" || res.RequestID != "t2" {
		t.Errorf("second turn after the 12 MiB update: %+v", res)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// --------------------------------------------------------------------- turn

// TestTurn_OneActiveTurn: a prompt while another turn of the session runs
// gets -32000 TURN_ACTIVE (PROTOCOL §4 session/prompt, one turn per session).
func TestTurn_OneActiveTurn(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "one-turn", "slow-turn=3000")
	first := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "slow"})
	s.waitTurnUpdate(o.Session, "t1")
	wantError(t, "second prompt during a turn",
		s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "again"}), -32000, "TURN_ACTIVE")
	res := decodeResult[turnResult](t, "first turn", s.await(first, 30*time.Second))
	if res.Status != "completed" || res.RequestID != "t1" {
		t.Errorf("first turn: %+v", res)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestTurn_DuplicateRequestID: a requestId already used in the session gets
// -32000 DUPLICATE_REQUEST_ID (PROTOCOL §4: unique within the session).
func TestTurn_DuplicateRequestID(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "dup", "")
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "one"}, &res)
	if res.Status != "completed" {
		t.Fatalf("first turn: %+v", res)
	}
	wantError(t, "prompt reusing requestId t1",
		s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "two"}), -32000, "DUPLICATE_REQUEST_ID")
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "three"}, &res)
	if res.Status != "completed" {
		t.Errorf("turn with a fresh requestId after the rejection: %+v", res)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestTurn_SessionCancelEndsTurnCancelled: session/cancel during a 30 s
// turn answers {cancelled: true} and the turn's result is status
// "cancelled" (PROTOCOL §4 session/cancel). The 20 s wait bound is below
// the agent's 30 s turn, so an ignored cancel fails the test.
func TestTurn_SessionCancelEndsTurnCancelled(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "cancel", "slow-turn=30000")
	id := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "slow"})
	s.waitTurnUpdate(o.Session, "t1")
	var c struct {
		Cancelled *bool `json:"cancelled"`
	}
	s.mustCall("session/cancel", map[string]any{"session": o.Session, "requestId": "t1"}, &c)
	if c.Cancelled == nil || !*c.Cancelled {
		t.Errorf("session/cancel result cancelled=%v, want true", c.Cancelled)
	}
	res := decodeResult[turnResult](t, "cancelled turn", s.await(id, 20*time.Second))
	if res.Status != "cancelled" || res.RequestID != "t1" {
		t.Errorf("turn result %+v, want status cancelled", res)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestTurn_CancelRequestEndsTurnCancelled: `$/cancelRequest` with the
// prompt's JSON-RPC id is the same as session/cancel for that turn
// (PROTOCOL §4 $/cancelRequest): the result is status "cancelled".
func TestTurn_CancelRequestEndsTurnCancelled(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "cancelreq", "slow-turn=30000")
	id := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "slow"})
	s.waitTurnUpdate(o.Session, "t1")
	s.cancelRequest(id)
	f := s.await(id, 20*time.Second)
	res := decodeResult[turnResult](t, "turn cancelled by $/cancelRequest", f)
	if res.Status != "cancelled" || res.RequestID != "t1" {
		t.Errorf("turn result %+v, want status cancelled", res)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// -------------------------------------------------------------------- close

// TestClose_IsIdempotent: a second session/close returns the first proof
// (same cleanupId) (PROTOCOL §4 session/close).
func TestClose_IsIdempotent(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "idem", "")
	p1 := closeProof(s, o.Session, nil)
	if !p1.Complete || p1.CleanupID == "" || p1.Origin != "close" {
		t.Fatalf("first close proof: %+v", p1)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	p2 := closeProof(s, o.Session, nil)
	if p2.CleanupID != p1.CleanupID || !p2.Complete {
		t.Errorf("second close proof cleanupId %q complete %v, want the first %q", p2.CleanupID, p2.Complete, p1.CleanupID)
	}
}

// TestClose_ConcurrentClosesShareOneAttempt: two closes sent back to back
// get the same proof (one cleanupId) (PROTOCOL §4 session/close).
func TestClose_ConcurrentClosesShareOneAttempt(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "concurrent", "")
	params := map[string]any{"session": o.Session, "reason": "e2e"}
	id1 := s.start("session/close", params)
	id2 := s.start("session/close", params)
	type closed struct {
		Proof proof `json:"proof"`
	}
	r1 := decodeResult[closed](t, "close 1", s.await(id1, 30*time.Second))
	r2 := decodeResult[closed](t, "close 2", s.await(id2, 30*time.Second))
	if !r1.Proof.Complete || !r2.Proof.Complete {
		t.Errorf("proofs not complete: %+v / %+v", r1.Proof, r2.Proof)
	}
	if r1.Proof.CleanupID == "" || r1.Proof.CleanupID != r2.Proof.CleanupID {
		t.Errorf("concurrent closes have cleanupIds %q and %q, want one shared attempt", r1.Proof.CleanupID, r2.Proof.CleanupID)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestClose_DiscardPersistentStateDeletesRecord: close with
// discardPersistentState deletes <stateDir>/sessions/<key>.json
// (PROTOCOL §4 session/close).
func TestClose_DiscardPersistentStateDeletesRecord(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "discard-me", "")
	rec := e.recordPath("discard-me")
	if _, err := os.Stat(rec); err != nil {
		t.Fatalf("no record after open: %v", err)
	}
	if pr := closeProof(s, o.Session, map[string]any{"discardPersistentState": true}); !pr.Complete {
		t.Errorf("proof not complete: %+v", pr)
	}
	if _, err := os.Stat(rec); !os.IsNotExist(err) {
		t.Errorf("record still present after discardPersistentState close (stat err %v)", err)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestClose_PreservesRecordByDefault: a plain close keeps the record and
// marks it closed (PROTOCOL §4 session/close; schema acpx.session.v1).
func TestClose_PreservesRecordByDefault(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "keep me", "")
	if pr := closeProof(s, o.Session, nil); !pr.Complete {
		t.Errorf("proof not complete: %+v", pr)
	}
	b, err := os.ReadFile(e.recordPath("keep me"))
	if err != nil {
		t.Fatalf("record not kept at the encodeURIComponent path: %v", err)
	}
	var rec struct {
		Schema string `json:"schema"`
		Closed bool   `json:"closed"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("record is not JSON: %v", err)
	}
	if !rec.Closed || rec.Schema != "acpx.session.v1" {
		t.Errorf("record schema %q closed %v, want acpx.session.v1 closed true", rec.Schema, rec.Closed)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// ----------------------------------------------------------------- provider

// TestProvider_CrashMidTurnFailsTurnAndReportsExit: a provider that dies
// mid-turn fails the turn with PROVIDER_PROCESS_LOST, a session/exited
// (during "turn") and a cleanup/proof (origin provider-exit, complete) are
// sent, and a later prompt gets PROVIDER_PROCESS_LOST (PROTOCOL §4
// session/prompt, §5 session/exited and cleanup/proof).
func TestProvider_CrashMidTurnFailsTurnAndReportsExit(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "crash", "crash-mid-turn")
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "crash"}, &res)
	if res.Status != "failed" || res.Error == nil || res.Error.Code != "PROVIDER_PROCESS_LOST" {
		t.Errorf("turn result %+v, want failed PROVIDER_PROCESS_LOST", res)
	}
	ex := s.waitNote("session/exited", 10*time.Second, func(p json.RawMessage) bool {
		var n struct {
			Session string `json:"session"`
		}
		return json.Unmarshal(p, &n) == nil && n.Session == o.Session
	})
	var exited struct {
		SessionKey string `json:"sessionKey"`
		Pid        int    `json:"pid"`
		ExitCode   *int   `json:"exitCode"`
		During     string `json:"during"`
	}
	_ = json.Unmarshal(ex, &exited)
	if exited.During != "turn" || exited.SessionKey != "crash" || exited.Pid != o.Process.Pid || exited.ExitCode == nil || *exited.ExitCode != 3 {
		t.Errorf("session/exited %s, want during turn, sessionKey crash, pid %d, exitCode 3", ex, o.Process.Pid)
	}
	pn := s.waitNote("cleanup/proof", 15*time.Second, func(p json.RawMessage) bool {
		var n struct {
			Proof proof `json:"proof"`
		}
		return json.Unmarshal(p, &n) == nil && n.Proof.Session == o.Session
	})
	var cp struct {
		Proof proof `json:"proof"`
	}
	_ = json.Unmarshal(pn, &cp)
	if cp.Proof.Origin != "provider-exit" || !cp.Proof.Complete {
		t.Errorf("cleanup/proof %s, want origin provider-exit complete true", truncate(string(pn), 600))
	}
	wantError(t, "prompt after the provider died",
		s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "again"}), -32000, "PROVIDER_PROCESS_LOST")
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// --------------------------------------------------------------------- open

// TestOpen_CancelRequestAbortsAdmission: `$/cancelRequest` for a pending
// session/open fails it with -32800 ADMISSION_ABORTED after its cleanup,
// whose proof (data.cleanup) is complete (PROTOCOL §4 $/cancelRequest, §3).
func TestOpen_CancelRequestAbortsAdmission(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("abort", "hang-new")
	p["handshakeTimeoutMs"] = 60000
	id := s.start("session/open", p)
	waitMarked(t, e.mark, 20*time.Second) // the provider is launched and hanging
	s.cancelRequest(id)
	d := wantError(t, "open cancelled by $/cancelRequest", s.await(id, 20*time.Second), -32800, "ADMISSION_ABORTED")
	if d.Cleanup == nil || !d.Cleanup.Complete {
		t.Errorf("data.cleanup missing or incomplete: %+v", d.Cleanup)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	// The aborted admission may stay listed as closed/dead, never as live.
	for _, l := range listSessions(s) {
		if st := l["state"]; st != "closed" && st != "dead" {
			t.Errorf("session/list after an aborted open lists a live entry: %v", l)
		}
	}
}

// TestOpen_HandshakeTimeoutReapsProvider: an agent that never answers
// session/new fails the open after handshakeTimeoutMs with
// ACPX_SESSION_HANDSHAKE_TIMEOUT and a complete data.cleanup, and nothing
// it launched survives (PROTOCOL §3, §4 handshakeTimeoutMs).
func TestOpen_HandshakeTimeoutReapsProvider(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("timeout", "hang-new")
	p["handshakeTimeoutMs"] = 200
	d := wantError(t, "open with a hanging session/new", s.call("session/open", p), -32000, "ACPX_SESSION_HANDSHAKE_TIMEOUT")
	if d.Cleanup == nil || !d.Cleanup.Complete || len(d.Cleanup.Processes) == 0 {
		t.Errorf("data.cleanup missing, incomplete or listing no process: %+v", d.Cleanup)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// ----------------------------------------------------------------- shutdown

// TestShutdown_ClosesLiveSessionsAndExitsZero: shutdown closes every live
// session and returns their complete proofs; exit then ends the process
// with status 0 (PROTOCOL §2.2–2.3).
func TestShutdown_ClosesLiveSessionsAndExitsZero(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	a := e.open(s, "shut-a", "")
	b := e.open(s, "shut-b", "")
	proofs, status := s.shutdownAndExit()
	if status != 0 {
		t.Errorf("exit status %d, want 0", status)
	}
	seen := map[string]bool{}
	for _, p := range proofs {
		if !p.Complete || p.Origin != "shutdown" {
			t.Errorf("shutdown proof for %s: complete %v origin %q, want complete shutdown", p.Session, p.Complete, p.Origin)
		}
		seen[p.Session] = true
	}
	if len(proofs) != 2 || !seen[a.Session] || !seen[b.Session] {
		t.Errorf("shutdown returned %d proofs for %v, want one each for %s and %s", len(proofs), seen, a.Session, b.Session)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestShutdown_StdinEOFCleansUp: stdin EOF with a live session is shutdown
// then exit: the process exits (status 0, the proof being complete) and
// nothing it launched survives (PROTOCOL §2.4).
func TestShutdown_StdinEOFCleansUp(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	e.open(s, "eof", "")
	if err := s.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if status := s.exitStatus(30 * time.Second); status != 0 {
		t.Errorf("exit status %d after stdin EOF, want 0\nstderr:\n%s", status, s.stderrText())
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// -------------------------------------------------------------- containment

// TestContainment_SetsidGrandchildIgnoringTermIsReaped: a provider that
// leaves a setsid'd grandchild ignoring SIGTERM is still proven gone: the
// close proof is complete and lists a "descendant" process, and the marker
// scan is empty (PROTOCOL §4 session/close, §6 "processes lists every
// process of the tree ... descendants included").
func TestContainment_SetsidGrandchildIgnoringTermIsReaped(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default-cgroup", nil},
		{"subreaper", []string{"--containment", "subreaper"}},
		{"process-group", []string{"--containment", "process-group"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFaultEnv(t)
			s := startSidecar(t, append([]string{"--state-dir", e.stateDir, "--term-grace-ms", "300"}, tc.args...)...)
			init := s.initialize(false)
			caps, _ := init["capabilities"].(map[string]any)
			t.Logf("containment reported by initialize: %v", caps["containment"])
			o := e.open(s, "grandchild", "grandchild")
			var grandchild int
			for _, pid := range markedPids(e.mark, "") {
				if pid != o.Process.Pid {
					grandchild = pid
				}
			}
			if grandchild == 0 {
				t.Fatalf("no grandchild carries the marker besides the provider %d", o.Process.Pid)
			}
			f := s.call("session/close", map[string]any{"session": o.Session, "reason": "e2e"})
			type closed struct {
				Proof proof `json:"proof"`
			}
			pr := decodeResult[closed](t, "close", f).Proof
			if !pr.Complete || !pr.Verified.TreeEmpty {
				t.Errorf("proof not complete: %+v", pr)
			}
			if want, _ := caps["containment"].(string); pr.Containment != want || (tc.name == "process-group" && want != "process-group") {
				t.Errorf("proof containment %q, initialize reported %q (subtest %s)", pr.Containment, want, tc.name)
			}
			desc := false
			for _, p := range pr.Processes {
				desc = desc || (p.Role == "descendant" && p.Pid == grandchild)
			}
			if !desc {
				t.Errorf("proof lists no descendant with the grandchild's pid %d: %+v", grandchild, pr.Processes)
			}
			waitNoMarked(t, e.mark, e.work, 10*time.Second)
		})
	}
}
