package e2e

// Steps for tests that read what the fault agent recorded (its mode
// record=<file>: every message it received and sent, and its argv), the
// aggregated error data and cleanup proofs of the sidecar's answers, and
// the short, injected bounds (handshakeTimeoutMs, --term-grace-ms,
// --kill-grace-ms, --close-timeout-ms) these tests use instead of waiting
// for the defaults. The `seed` prefix marks this family of helpers.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// seedProof is the harness's cleanup proof (docs/protocol.md, Cleanup
// proof).
type seedProof = proof

type seedCause struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// sameAgent reports whether agentPid, the pid the fault agent reported
// of itself, names hostPid, the host's pid of a provider: the same
// number, or — the agent running in a PID namespace of its own
// (sandbox.processes own-tree, the default) — hostPid's last NSpid
// while it lives; once it is gone, pid 2, the one an own-tree agent has
// here (the namespace's init is 1, single-threaded on x86-64, and the
// agent the next fork).
func sameAgent(agentPid, hostPid int) bool {
	if agentPid == hostPid {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(hostPid) + "/status")
	if err != nil {
		return agentPid == 2
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			return len(f) > 1 && f[len(f)-1] == strconv.Itoa(agentPid)
		}
	}
	return false
}

// providerOf is the proof's provider pid (0 if none).
func (p *seedProof) providerOf() int {
	for _, pr := range p.Processes {
		if pr.Role == "provider" {
			return pr.Pid
		}
	}
	return 0
}

func (p *seedProof) hasProcess(pid int, role string) bool {
	for _, pr := range p.Processes {
		if pr.Pid == pid && (role == "" || pr.Role == role) {
			return true
		}
	}
	return false
}

func (p *seedProof) errorCodes() []string {
	var out []string
	for _, e := range p.Errors {
		out = append(out, e.Code)
	}
	return out
}

// seedErr is an error's data (docs/protocol.md, Error model) with the
// aggregated causes.
type seedErr struct {
	Message string
	Code    string      `json:"code"`
	Field   string      `json:"field"`
	Cleanup *seedProof  `json:"cleanup"`
	Proof   *seedProof  `json:"proof"`
	Causes  []seedCause `json:"causes"`
}

// seedWantError is wantError that also decodes the proof and causes.
func seedWantError(t testing.TB, what string, f *frame, rpcCode int, dataCode string) seedErr {
	t.Helper()
	wantError(t, what, f, rpcCode, dataCode)
	var d seedErr
	if err := json.Unmarshal(f.Error.Data, &d); err != nil {
		t.Fatalf("%s: error data %s: %v", what, f.Error.Data, err)
	}
	d.Message = f.Error.Message
	return d
}

// seedOpen is a session/open result (docs/protocol.md, session/open).
type seedOpen struct {
	Session    string `json:"session"`
	SessionKey string `json:"sessionKey"`
	Identity   struct {
		SessionKey       string `json:"acpxRecordId"`
		BackendSessionID string `json:"backendSessionId"`
		AgentSessionID   string `json:"agentSessionId"`
	} `json:"identity"`
	Resumed bool `json:"resumed"`
	Models  *struct {
		CurrentModelID string `json:"currentModelId"`
	} `json:"models"`
	Process struct {
		Pid         int    `json:"pid"`
		Pgid        int    `json:"pgid"`
		Containment string `json:"containment"`
	} `json:"process"`
}

// seedArgs are the sidecar flags of these tests: short, injected bounds.
func seedArgs(e *faultEnv, extra ...string) []string {
	return append([]string{"--state-dir", e.stateDir, "--term-grace-ms", "300", "--kill-grace-ms", "300",
		"--close-timeout-ms", "300"}, extra...)
}

// seedRecordFile is a fresh path for the fault agent's record=<file>.
func seedRecordFile(t *testing.T) string { return filepath.Join(agentWritableDir(t), "agent.jsonl") }

// agentWritableDir is a new directory, removed at the end of the test,
// that a fault agent may write under the sidecar's default sandbox
// (workspace, docs/protocol.md §19) when its open keeps the sidecar's
// HOME (withHostHome): it lies under that HOME, one of the places that
// sandbox leaves writable. A t.TempDir() is not.
func agentWritableDir(t testing.TB) string {
	t.Helper()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(home, "acpx-e2e-agent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// seedOpenParams are openParams whose agent records every message to rec
// (an agentWritableDir file: the open keeps the sidecar's HOME).
func seedOpenParams(e *faultEnv, key, rec, modes string) map[string]any {
	m := "record=" + rec
	if modes != "" {
		m += "," + modes
	}
	return withHostHome(e.openParams(key, m))
}

// withHostHome makes the open name the sidecar's HOME as its own
// (inheritEnv: ["HOME"]), so its agent writes agentWritableDir's
// directories; without it a sandboxed agent gets its key's private HOME
// (docs/protocol.md §19).
func withHostHome(p map[string]any) map[string]any {
	names, _ := p["inheritEnv"].([]string)
	p["inheritEnv"] = append(names, "HOME")
	return p
}

func seedMustOpen(s *sidecar, p map[string]any) seedOpen {
	s.t.Helper()
	return decodeResult[seedOpen](s.t, "session/open "+fmt.Sprint(p["sessionKey"]), s.call("session/open", p))
}

// seedAgentMsg is one line the fault agent recorded (mode record=<file>).
type seedAgentMsg struct {
	Dir  string   `json:"dir"` // start, recv or sent
	Pid  int      `json:"pid"`
	Argv []string `json:"argv"`
	Msg  struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	} `json:"msg"`
	raw string
}

// seedReadAgent reads the agent's record; a missing file is no line (the
// agent never ran). A final line without its newline is still being written
// and is left out. Every frame the sidecar sent the agent is checked
// against the ACP v1 schema (checkACPRecord).
func seedReadAgent(t testing.TB, path string) []seedAgentMsg {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []seedAgentMsg
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		var m seedAgentMsg
		if err := json.Unmarshal(b[:i], &m); err != nil {
			t.Fatalf("agent record line %q: %v", truncate(string(b[:i]), 200), err)
		}
		m.raw = string(b[:i])
		out = append(out, m)
		b = b[i+1:]
	}
	checkACPRecord(t, path, out) // acp_check_test.go
	return out
}

// seedWaitAgent polls the agent's record (bounded) until pred holds.
func seedWaitAgent(t testing.TB, path, what string, pred func([]seedAgentMsg) bool) []seedAgentMsg {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		msgs := seedReadAgent(t, path)
		if pred(msgs) {
			return msgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent record never showed %s; it holds %d lines", what, len(msgs))
		}
		time.Sleep(10 * time.Millisecond) // polling a file the agent appends to, bounded
	}
}

// seedRecv returns the requests of method the agent received, in order.
func seedRecv(msgs []seedAgentMsg, method string) []seedAgentMsg {
	var out []seedAgentMsg
	for _, m := range msgs {
		if m.Dir == "recv" && m.Msg.Method == method {
			out = append(out, m)
		}
	}
	return out
}

// seedReply returns the agent's answer to the request with id, or nil.
func seedReply(msgs []seedAgentMsg, id json.RawMessage) *seedAgentMsg {
	for i := range msgs {
		if m := msgs[i]; m.Dir == "sent" && m.Msg.Method == "" && string(m.Msg.ID) == string(id) {
			return &msgs[i]
		}
	}
	return nil
}

func seedSessionIDOf(raw json.RawMessage) string {
	var v struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(raw, &v)
	return v.SessionID
}

// seedProofNotes returns the cleanup/proof notifications for session.
func seedProofNotes(s *sidecar, session string) []seedProof {
	var out []seedProof
	for _, f := range s.notesOf("cleanup/proof") {
		var n struct {
			Proof seedProof `json:"proof"`
		}
		if json.Unmarshal(f.Params, &n) == nil && n.Proof.Session == session {
			out = append(out, n.Proof)
		}
	}
	return out
}

// seedWaitProof waits for a cleanup/proof notification matching pred.
func seedWaitProof(s *sidecar, pred func(seedProof) bool) seedProof {
	s.t.Helper()
	raw := s.waitNote("cleanup/proof", 30*time.Second, func(p json.RawMessage) bool {
		var n struct {
			Proof seedProof `json:"proof"`
		}
		return json.Unmarshal(p, &n) == nil && pred(n.Proof)
	})
	var n struct {
		Proof seedProof `json:"proof"`
	}
	_ = json.Unmarshal(raw, &n)
	return n.Proof
}

// seedFrameIndex is the wire position of the first frame matching pred,
// or -1.
func seedFrameIndex(s *sidecar, pred func(f *frame) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, line := range s.raw {
		f := &frame{}
		if json.Unmarshal(line, f) == nil && pred(f) {
			return i
		}
	}
	return -1
}

// seedClose sends session/close and returns the reply frame.
func seedClose(s *sidecar, session string, extra map[string]any) *frame {
	p := map[string]any{"session": session, "reason": "seed"}
	for k, v := range extra {
		p[k] = v
	}
	return s.call("session/close", p)
}

func seedCloseProof(t testing.TB, s *sidecar, session string, extra map[string]any) seedProof {
	t.Helper()
	type closed struct {
		Proof seedProof `json:"proof"`
	}
	return decodeResult[closed](t, "session/close", seedClose(s, session, extra)).Proof
}

// seedCloseEventually closes session under seedShortGraceArgs, where even a
// quick provider can outlast --kill-grace-ms 1 on a loaded machine: a
// CLEANUP_INCOMPLETE reply is accepted when the retained cleanup then sends
// a complete cleanup/proof with the same cleanupId, which is returned.
// Any other error fails the test.
func seedCloseEventually(t testing.TB, s *sidecar, session string) seedProof {
	t.Helper()
	f := seedClose(s, session, nil)
	if f.Error == nil {
		type closed struct {
			Proof seedProof `json:"proof"`
		}
		return decodeResult[closed](t, "session/close", f).Proof
	}
	d := seedWantError(t, "session/close", f, -32000, "CLEANUP_INCOMPLETE")
	if d.Proof == nil {
		t.Fatalf("CLEANUP_INCOMPLETE without data.proof")
	}
	final := seedWaitProof(s, func(pr seedProof) bool { return pr.Session == session && pr.Complete })
	if final.CleanupID != d.Proof.CleanupID {
		t.Errorf("final proof cleanupId %q, retained one %q", final.CleanupID, d.Proof.CleanupID)
	}
	return final
}

func seedReadJSON(t testing.TB, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func seedEnv(p map[string]any) map[string]string { return p["env"].(map[string]string) }

// seedHogModes make a provider that ignores SIGTERM and whose exit after
// SIGKILL takes the kernel milliseconds (512 MiB of touched memory to
// free): with --kill-grace-ms 1 its tree is then not yet observed empty
// when the first termination gives up, so the cleanup is retained
// (docs/rules.md#r15). Measured here: a SIGKILLed 512 MiB hog takes about
// 130 ms to become a zombie, far past 1 ms; touching it at start takes
// about 3 s. (It was 2 GiB: 12 s to touch on a quiet machine and over the
// 30 s handshake bound under load.)
const seedHogModes = "ignore-term,hog=512"

// seedShortGraceArgs are sidecar flags under which a hog's first
// termination cannot be proven.
func seedShortGraceArgs(e *faultEnv, extra ...string) []string {
	return append([]string{"--state-dir", e.stateDir, "--term-grace-ms", "1", "--kill-grace-ms", "1",
		"--close-timeout-ms", "300"}, extra...)
}

// seedLateHandshake opens with an agent that answers session/new only once
// SIGTERM arrives (new-on-term), lets abort (cancel or timeout) end the
// handshake, and checks the late cleanup of docs/rules.md#r6 and #r7: the
// open fails with wantCode and a complete proof; the late session is closed
// with ACP session/close naming the id the agent created, and that cleanup
// is reported by cleanup/proof with reason "admission aborted". It returns
// the open's proof and the late one.
func seedLateHandshake(t *testing.T, cancel bool) (seedProof, seedProof) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	rec := seedRecordFile(t)
	p := seedOpenParams(e, "late", rec, "new-on-term")
	wantRPC, wantCode := -32000, "ACPX_SESSION_HANDSHAKE_TIMEOUT"
	if cancel {
		p["handshakeTimeoutMs"] = 60000
		wantRPC, wantCode = -32800, "ADMISSION_ABORTED"
	} else {
		// Long enough for initialize and session/new to reach the agent
		// on a loaded machine: what times out must be session/new, which
		// this agent answers only at SIGTERM (an initialize given up late
		// creates no session to close).
		p["handshakeTimeoutMs"] = 1500
	}
	id := s.start("session/open", p)
	if cancel {
		seedWaitAgent(t, rec, "session/new received", func(m []seedAgentMsg) bool { return len(seedRecv(m, "session/new")) == 1 })
		s.cancelRequest(id)
	}
	d := seedWantError(t, "open whose handshake was given up", s.await(id, 30*time.Second), wantRPC, wantCode)
	if d.Cleanup == nil || !d.Cleanup.Complete {
		t.Fatalf("data.cleanup missing or incomplete: %+v", d.Cleanup)
	}
	late := seedWaitProof(s, func(pr seedProof) bool { return pr.Session == d.Cleanup.Session && pr.CleanupID != d.Cleanup.CleanupID })
	if late.Reason != "admission aborted" || late.ProtocolClose.Outcome != "ok" || !late.Complete || late.SessionKey != "late" {
		t.Errorf("late cleanup/proof reason %q protocolClose %+v complete %v sessionKey %q; want \"admission aborted\", ok, true, late",
			late.Reason, late.ProtocolClose, late.Complete, late.SessionKey)
	}
	msgs := seedReadAgent(t, rec)
	news := seedRecv(msgs, "session/new")
	if len(news) != 1 {
		t.Fatalf("agent received %d session/new", len(news))
	}
	created := ""
	if r := seedReply(msgs, news[0].Msg.ID); r != nil {
		created = seedSessionIDOf(r.Msg.Result)
	}
	closes := seedRecv(msgs, "session/close")
	if created == "" || len(closes) != 1 || seedSessionIDOf(closes[0].Msg.Params) != created {
		t.Errorf("late session %q: agent received session/close %v, want exactly one naming it", created, closes)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	return *d.Cleanup, late
}
