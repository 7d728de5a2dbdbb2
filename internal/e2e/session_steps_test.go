package e2e

// Shared steps of the e2e tests: a fault-agent workspace, session/open
// parameters, the result and error shapes of docs/protocol.md as tests
// read them, and the small request helpers every feature file uses.

import (
	"encoding/json"
	"math"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/modelstub"
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

// recordPath is where the sidecar keeps sessionKey's record
// (docs/protocol.md, Sessions).
func (e *faultEnv) recordPath(key string) string {
	return filepath.Join(e.stateDir, "sessions", strings.ReplaceAll(url.QueryEscape(key), "+", "%20")+".json")
}

// codexEnv prepares the real codex-acp against a loopback model stub: it
// returns the agent path, a CODEX_HOME and the stub.
func codexEnv(t *testing.T) (agent, codexHome string, stub *modelstub.Stub) {
	t.Helper()
	agent = filepath.Join(repoRoot, "node_modules", "@zed-industries", "codex-acp", "bin", "codex-acp.js")
	if _, err := os.Stat(agent); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("codex-acp is not installed (make deps runs npm ci): %v", err)
		}
		t.Skip("codex-acp not installed; run `make deps`")
	}
	stub = modelstub.New(t.Logf)
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	codexHome = t.TempDir()
	if err := modelstub.WriteCodexHome(codexHome, srv.URL); err != nil {
		t.Fatal(err)
	}
	return agent, codexHome, stub
}

type openResult struct {
	Session  string `json:"session"`
	Identity struct {
		SessionKey       string `json:"acpxRecordId"`
		BackendSessionID string `json:"backendSessionId"`
		AgentSessionID   string `json:"agentSessionId"`
	} `json:"identity"`
	Resumed bool `json:"resumed"`
	Agent   struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"agent"`
	Process struct {
		Pid         int    `json:"pid"`
		Containment string `json:"containment"`
	} `json:"process"`
	Sandbox *sandboxResult `json:"sandbox"`
}

// errData is the `data` of a sidecar error (docs/protocol.md, Error model).
type errData struct {
	Code      string   `json:"code"`
	Retryable *bool    `json:"retryable"`
	Field     string   `json:"field"`
	Supported []int    `json:"supported"`
	Cleanup   *proof   `json:"cleanup"`
	Proof     *proof   `json:"proof"`
	Paths     []string `json:"paths"`
	// Capability: a CAPABILITY_UNSUPPORTED's (docs/protocol.md §23).
	Capability string `json:"capability"`
	// Limit: a SIDECAR_AT_CAPACITY's (docs/protocol.md §21, §24).
	Limit *int `json:"limit"`
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
		t.Errorf("%s: error data has no boolean retryable (docs/protocol.md, Error model): %s", what, f.Error.Data)
	}
	return d
}

// turnResult is a session/prompt result (docs/protocol.md, session/prompt).
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

type updateNote struct {
	Session   string          `json:"session"`
	RequestID *string         `json:"requestId"`
	Seq       uint64          `json:"seq"`
	Update    json.RawMessage `json:"update"`
}

func updatesOf(s *sidecar, session string) []updateNote {
	var out []updateNote
	for _, f := range s.notesOf("session/update") {
		var u updateNote
		if json.Unmarshal(f.Params, &u) == nil && u.Session == session {
			out = append(out, u)
		}
	}
	return out
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

// closeClean closes session, requires a complete proof, and requires that
// no process of the test is left.
func closeClean(t *testing.T, s *sidecar, session, mark, work string) {
	t.Helper()
	p := closeProof(s, session, nil)
	if !p.Complete || !p.Verified.TreeEmpty {
		t.Fatalf("close proof not complete: %+v", p)
	}
	waitNoMarked(t, mark, work, 10*time.Second)
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

// controlModels / controlModes are the {models} / {modes} shapes
// (docs/protocol.md, session/setModel, session/setMode,
// session/setConfigOption).
type controlModels struct {
	CurrentModelID    string   `json:"currentModelId"`
	AvailableModelIDs []string `json:"availableModelIds"`
}

type controlModes struct {
	CurrentModeID    string   `json:"currentModeId"`
	AvailableModeIDs []string `json:"availableModeIds"`
}

type usageJSON struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	TotalTokens  int64 `json:"totalTokens"`
}

type costJSON struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	Basis    string  `json:"basis"`
}

// statusJSON is the part of session/status these tests read.
type statusJSON struct {
	State         string            `json:"state"`
	Models        *controlModels    `json:"models"`
	Modes         *controlModes     `json:"modes"`
	ConfigOptions []json.RawMessage `json:"configOptions"`
	Usage         struct {
		Cumulative usageJSON            `json:"cumulative"`
		PerRequest map[string]usageJSON `json:"perRequest"`
	} `json:"usage"`
	Cost *costJSON `json:"cost"`
}

// promptUsage is a session/prompt result with usage and cost.
type promptUsage struct {
	Status string     `json:"status"`
	Usage  *usageJSON `json:"usage"`
	Cost   *costJSON  `json:"cost"`
}

func statusOf(s *sidecar, session string) statusJSON {
	s.t.Helper()
	var st statusJSON
	s.mustCall("session/status", map[string]any{"session": session}, &st)
	return st
}

// optionValue returns the currentValue of config option id, or "".
func optionValue(opts []json.RawMessage, id string) string {
	for _, raw := range opts {
		var o struct {
			ID           string `json:"id"`
			CurrentValue string `json:"currentValue"`
		}
		if json.Unmarshal(raw, &o) == nil && o.ID == id {
			return o.CurrentValue
		}
	}
	return ""
}

// runTurn runs one turn and requires status completed.
func runTurn(t *testing.T, s *sidecar, session, requestID, prompt string) promptUsage {
	t.Helper()
	res := decodeResult[promptUsage](t, "turn "+requestID,
		s.call("session/prompt", map[string]any{"session": session, "requestId": requestID, "prompt": prompt}))
	if res.Status != "completed" {
		t.Fatalf("turn %s: %+v, want completed", requestID, res)
	}
	return res
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
