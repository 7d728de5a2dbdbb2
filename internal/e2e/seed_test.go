package e2e

// SEED-BEHAVIOR conformance (issue 3): every rule of
// /work/shared/design/SEED-BEHAVIOR.md has at least one test here, named
// after the rule. Each drives the built acpx-sidecar with the fault agent
// (cmd/faultagent, real processes) and asserts on frames, on the files the
// sidecar writes, on what the agent recorded it received (fault mode
// record=<file>) and on the process table (markedPids / waitNoMarked).
// Bounds are injected (handshakeTimeoutMs, --term-grace-ms, --kill-grace-ms,
// --close-timeout-ms) instead of waiting for the defaults.
//
// Rule → test(s):
//
//	 1 pre-aborted open                 TestAdmission_PreAbortedOpenLaunchesNothing
//	 2 PLATFORM_UNSUPPORTED             TestAdmission_UncontainablePlatformRefusedBeforeLaunch (wire half skipped on Linux; the refusal itself: internal/adapter TestAdmission_UncontainablePlatformRefusedBeforeLaunch)
//	 3 secrets; model + prompt fwd      TestAdmission_LaunchSecretOnlyInChildEnvModelAndPromptForwarded
//	 4 verified command, exact args     TestAdmission_OnlyVerifiedCommandRunsWithExactArgsInOwnGroup
//	 5 handshake rejects after spawn    TestAdmission_HandshakeRejectedAfterSpawnTerminatesProviderWithoutProtocolClose
//	 6 cancel during handshake          TestAdmission_CancelDuringHandshakeClosesLateSession
//	 7 handshake timeout                TestAdmission_HandshakeTimeoutClosesLateSession
//	 8 identity before admission        TestAdmission_IdentityCheckedBeforeAdmission
//	 9 record save fails                TestAdmission_RecordSaveFailureClosesCreatedSession
//	10 recovered handshake fails        TestAdmission_RecoveredSessionHandshakeFailureClosesRecoveredIdentity
//	11 stalled protocol close           TestAdmission_StalledCloseBoundedAndErrorsAggregated
//	12 error aggregation order          TestAdmission_FailedHandshakeErrorsAggregatedInOrder
//	13 unknown agent profile            TestAdmission_UnknownAgentRefusedBeforeAnythingIsConstructed
//	14 classified, redacted failure     TestAdmission_AgentRejectionClassifiedAndRedacted
//	15 retained cleanup                 TestCleanup_RetainedUntilTreeProvenGone
//	16 one protocol close in flight     TestCleanup_OneProtocolCloseInFlightPerTarget
//	17 coalesced by record id           TestCleanup_OneCleanupOwnerPerRecordId
//	18 key promoted to record identity  TestCleanup_SessionKeyIsTheRecordIdentityWithBothIdsKept
//	19 exact record ids                 TestAdmission_WhitespaceDistinctRecordIdsAreDistinct
//	20 termination outlives budget      TestCleanup_ProcessTerminationOutlivesProtocolCloseBudget
//	21 spawn after seal                 TestCleanup_SealedSupervisorLaunchesNothing
//	22 no signal to a recycled id       TestCleanup_GroupTerminatedAfterLeaderExits
//	23 status from persisted record     TestRunning_StatusMapsPersistedRecordAndVerifiesIdentity
//	24 setModel via config option       TestRunning_SetModelThroughConfigOptionThenVerified
//	25 close preserves state            TestRunning_ClosePreservesStateUnlessDiscarded
//	26 close reports earlier failures   TestRunning_CloseAfterProviderDeathReportsItsExit
//	27 permission authority per turn    TestRunning_LateHostAnswerNeverApprovesNextTurn
//	28 provider lost during a turn      TestRunning_ProviderDeathFailsTurnAndLaterPrompts
//	29 late close failure               TestCleanup_LateCloseFailureAfterTimeoutRevivesNothing
//	30 turn vs session cost             TestRunning_TurnAndSessionCostReportedSeparately

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ------------------------------------------------------------------ helpers

// seedProof is the harness's cleanup proof (PROTOCOL §6).
type seedProof = proof

type seedCause struct {
	Code    string `json:"code"`
	Message string `json:"message"`
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

// seedErr is an error's data (PROTOCOL §3) with the aggregated causes.
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

// seedOpen is a session/open result (PROTOCOL §4).
type seedOpen struct {
	Session    string `json:"session"`
	SessionKey string `json:"sessionKey"`
	Identity   struct {
		AcpxRecordID     string `json:"acpxRecordId"`
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
func seedRecordFile(t *testing.T) string { return filepath.Join(t.TempDir(), "agent.jsonl") }

// seedOpenParams are openParams whose agent records every message to rec.
func seedOpenParams(e *faultEnv, key, rec, modes string) map[string]any {
	m := "record=" + rec
	if modes != "" {
		m += "," + modes
	}
	return e.openParams(key, m)
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
// and is left out.
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
// SIGKILL takes the kernel milliseconds (2 GiB of touched memory to free):
// with --kill-grace-ms 1 its tree is then not yet observed empty when the
// first termination gives up, so the cleanup is retained (SEED-BEHAVIOR 15).
const seedHogModes = "ignore-term,hog=2048"

// seedShortGraceArgs are sidecar flags under which a hog's first
// termination cannot be proven.
func seedShortGraceArgs(e *faultEnv, extra ...string) []string {
	return append([]string{"--state-dir", e.stateDir, "--term-grace-ms", "1", "--kill-grace-ms", "1",
		"--close-timeout-ms", "300"}, extra...)
}

// ---------------------------------------------------------------- admission

// TestAdmission_PreAbortedOpenLaunchesNothing:
// SEED-BEHAVIOR 1 (T: rejects a pre-aborted admission): an open cancelled
// before it starts fails with the caller's reason (-32800
// ADMISSION_ABORTED) and launches nothing; its proof is complete by
// construction. The open and its `$/cancelRequest` are written in one
// frame burst with a fresh stateDir each time, so the cancel is handled
// before the admission checks it; an attempt whose cancel lost that race
// (the provider was already launched) must still be aborted with a
// complete proof. At least one attempt must hit the pre-launch path, and
// there the agent never ran (its record file does not exist).
func TestAdmission_PreAbortedOpenLaunchesNothing(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	pre := 0
	for i := 0; i < 20 && pre == 0; i++ {
		rec := seedRecordFile(t)
		p := seedOpenParams(e, fmt.Sprintf("pre-abort-%d", i), rec, "")
		p["stateDir"] = t.TempDir()
		s.mu.Lock()
		s.nextID++
		id := s.nextID
		s.mu.Unlock()
		open, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "session/open", "params": p})
		cancel, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": map[string]any{"id": id}})
		s.sendRaw([]byte(string(open) + "\n" + string(cancel) + "\n"))
		d := seedWantError(t, "pre-aborted open", s.await(strconv.Itoa(id), 30*time.Second), -32800, "ADMISSION_ABORTED")
		if d.Cleanup == nil || !d.Cleanup.Complete {
			t.Fatalf("aborted open: data.cleanup missing or incomplete: %+v", d.Cleanup)
		}
		if d.Cleanup.Verified.Method != "nothing was launched" {
			t.Logf("attempt %d: the cancel arrived after launch (proof %q); retrying", i, d.Cleanup.Verified.Method)
			continue
		}
		pre++
		if len(d.Cleanup.Processes) != 0 || len(d.Cleanup.Signals) != 0 || d.Cleanup.ProtocolClose.Outcome != "skipped" {
			t.Errorf("pre-launch abort proof lists work done: %+v", d.Cleanup)
		}
		if msgs := seedReadAgent(t, rec); len(msgs) != 0 {
			t.Errorf("the agent ran although the open was aborted before launch: %s", msgs[0].raw)
		}
	}
	if pre == 0 {
		t.Fatalf("no open was aborted before launch in 20 attempts")
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAdmission_UncontainablePlatformRefusedBeforeLaunch:
// SEED-BEHAVIOR 2 (T: rejects Windows): where a provider tree cannot be
// contained, nothing is launched. On Linux the observable consequence is
// that a sidecar asked for a containment it cannot set up refuses to serve
// at all (exit status 2, "containment unavailable" on stderr, nothing on
// stdout) so no open can launch anything. The wire error
// PLATFORM_UNSUPPORTED itself is not produced by a Linux build (see the
// skipped subtest).
func TestAdmission_UncontainablePlatformRefusedBeforeLaunch(t *testing.T) {
	t.Run("unavailable-containment-serves-nothing", func(t *testing.T) {
		notCgroup := t.TempDir() // not below the cgroup2 mount
		cmd := exec.Command(sidecarBin, "--state-dir", t.TempDir(), "--containment", "cgroup", "--cgroup-parent", notCgroup)
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"e2e","version":"0"}}}` + "\n")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Fatalf("sidecar with an unusable --cgroup-parent: err %v, want exit status 2\nstderr: %s", err, errb.String())
		}
		if out.Len() != 0 {
			t.Errorf("sidecar answered on stdout although it cannot contain providers: %q", truncate(out.String(), 300))
		}
		if !strings.Contains(errb.String(), "unavailable") {
			t.Errorf("stderr does not say containment is unavailable: %s", truncate(errb.String(), 600))
		}
	})
	t.Run("PLATFORM_UNSUPPORTED-on-the-wire", func(t *testing.T) {
		t.Skip("not producible on Linux: adapter.Manager.Open answers PLATFORM_UNSUPPORTED only when runtime.GOOS != linux " +
			"or it has no Supervisor, and cmd/acpx-sidecar always builds one or exits 2; on a non-Linux build " +
			"reaper.NewSupervisor returns ErrUnsupported and main.go also exits 2 before serving, so no build answers " +
			"an open with PLATFORM_UNSUPPORTED today. Exercising it needs a non-Linux e2e run of a main.go that " +
			"serves without a Supervisor")
	})
}

// TestAdmission_LaunchSecretOnlyInChildEnvModelAndPromptForwarded:
// SEED-BEHAVIOR 3 (T: opens a persistent Codex session without persisting
// launch secrets): the launch secret is in the provider's environment
// (/proc/<pid>/environ) and nowhere else — not in any request the agent
// received (initialize, session/new, …), the record, the ownership ledger,
// frames, logs or proofs — while the requested model (verified, selected
// through the model config option) and the appended system prompt
// (session/new `_meta.systemPrompt.append`) reach the agent.
func TestAdmission_LaunchSecretOnlyInChildEnvModelAndPromptForwarded(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	secret := "sk-seed3-" + randHex(12)
	rec := seedRecordFile(t)
	p := seedOpenParams(e, "secret", rec, "")
	seedEnv(p)["SEED_SECRET"] = secret
	p["model"] = "fa-large"
	p["systemPrompt"] = "answer in haiku"
	o := seedMustOpen(s, p)
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", o.Process.Pid))
	if err != nil {
		t.Fatalf("provider environ: %v", err)
	}
	if !bytes.Contains(append([]byte{0}, environ...), []byte("\x00SEED_SECRET="+secret+"\x00")) {
		t.Errorf("the launch secret is not in the provider's environment")
	}
	if o.Models == nil || o.Models.CurrentModelID != "fa-large" {
		t.Errorf("open result models %+v, want currentModelId fa-large", o.Models)
	}
	msgs := seedReadAgent(t, rec)
	news := seedRecv(msgs, "session/new")
	if len(news) != 1 {
		t.Fatalf("agent received %d session/new, want 1", len(news))
	}
	var np struct {
		Meta struct {
			SystemPrompt struct {
				Append string `json:"append"`
			} `json:"systemPrompt"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(news[0].Msg.Params, &np)
	if np.Meta.SystemPrompt.Append != "answer in haiku" {
		t.Errorf("session/new params %s: want _meta.systemPrompt.append %q", news[0].Msg.Params, "answer in haiku")
	}
	sets := seedRecv(msgs, "session/set_config_option")
	if len(sets) != 1 || !strings.Contains(string(sets[0].Msg.Params), `"configId":"model"`) || !strings.Contains(string(sets[0].Msg.Params), `"value":"fa-large"`) {
		t.Errorf("model not selected through the model config option: %d set_config_option requests %v", len(sets), sets)
	}
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "hi"}, &res)
	s.mustCall("session/status", map[string]any{"session": o.Session}, nil)
	if pr := seedCloseProof(t, s, o.Session, nil); !pr.Complete {
		t.Errorf("close proof incomplete: %+v", pr)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	for _, m := range seedReadAgent(t, rec) {
		if m.Dir == "recv" && strings.Contains(m.raw, secret) {
			t.Errorf("the agent received the secret in a request: %s", truncate(m.raw, 300))
		}
	}
	grepSecret(t, secret, e.stateDir, s.allOutput())
}

// TestAdmission_OnlyVerifiedCommandRunsWithExactArgsInOwnGroup:
// SEED-BEHAVIOR 4 (T: launches only through the verified command lease):
// with command.sha256 the digest-verified file is what runs
// (/proc/<pid>/exe), with exactly the args asked for (argv as the agent saw
// it, spaces and empty strings intact), as the leader of its own process
// group inside its own containment unit; a symlinked command with sha256 is
// refused (it is opened without following symlinks) and never runs.
func TestAdmission_OnlyVerifiedCommandRunsWithExactArgsInOwnGroup(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	bin, err := os.ReadFile(faultBin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	digest := hex.EncodeToString(sum[:])

	rec := seedRecordFile(t)
	args := []string{"--mode", "record=" + rec, "--", "plain", "two words", "", "ünïcode", "--mode=not-a-flag"}
	p := e.openParams("exact-args", "")
	p["command"] = map[string]any{"path": faultBin, "args": args, "sha256": digest}
	o := seedMustOpen(s, p)

	msgs := seedReadAgent(t, rec)
	if len(msgs) == 0 || msgs[0].Dir != "start" {
		t.Fatalf("agent record has no start line")
	}
	argv := msgs[0].Argv
	if len(argv) != len(args)+1 || argv[0] != faultBin {
		t.Fatalf("agent argv %q, want [%s %q]", argv, faultBin, args)
	}
	for i, a := range args {
		if argv[i+1] != a {
			t.Errorf("argv[%d] = %q, want %q", i+1, argv[i+1], a)
		}
	}
	if msgs[0].Pid != o.Process.Pid {
		t.Errorf("the process that ran the agent is %d, the open reports provider %d", msgs[0].Pid, o.Process.Pid)
	}
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", o.Process.Pid)); err != nil || exe != faultBin {
		t.Errorf("provider executes %q (err %v), want the verified %s", exe, err, faultBin)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", o.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if pgrp, _ := strconv.Atoi(fields[2]); pgrp != o.Process.Pid || o.Process.Pgid != o.Process.Pid {
		t.Errorf("provider %d runs in process group %d (open reports pgid %d), want its own group", o.Process.Pid, pgrp, o.Process.Pgid)
	}
	if o.Process.Containment == "cgroup" {
		mine, _ := os.ReadFile("/proc/self/cgroup")
		theirs, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", o.Process.Pid))
		if bytes.Equal(mine, theirs) {
			t.Errorf("provider shares the test's cgroup %q under cgroup containment", theirs)
		}
	}

	link := filepath.Join(t.TempDir(), "agent-link")
	if err := os.Symlink(faultBin, link); err != nil {
		t.Fatal(err)
	}
	rec2 := seedRecordFile(t)
	p = e.openParams("via-symlink", "")
	p["command"] = map[string]any{"path": link, "args": []string{"--mode", "record=" + rec2}, "sha256": digest}
	seedWantError(t, "sha256 command through a symlink", s.call("session/open", p), -32000, "COMMAND_NOT_EXECUTABLE")
	if len(seedReadAgent(t, rec2)) != 0 {
		t.Errorf("the symlinked command ran")
	}
	seedCloseProof(t, s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAdmission_HandshakeRejectedAfterSpawnTerminatesProviderWithoutProtocolClose:
// SEED-BEHAVIOR 5 (T: terminates a provider spawned before the session
// handshake rejects): session/new fails after the provider was spawned;
// the open fails ACPX_SESSION_ENSURE_FAILED, the provider (the very process
// that ran the agent) is in the complete proof and gone, and since no
// session exists no ACP session/close was sent (protocolClose "skipped").
func TestAdmission_HandshakeRejectedAfterSpawnTerminatesProviderWithoutProtocolClose(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	rec := seedRecordFile(t)
	d := seedWantError(t, "open with a rejecting session/new",
		s.call("session/open", seedOpenParams(e, "rejects", rec, "error-new=no session for you")), -32000, "ACPX_SESSION_ENSURE_FAILED")
	msgs := seedReadAgent(t, rec)
	if len(msgs) == 0 {
		t.Fatalf("the agent never ran")
	}
	if d.Cleanup == nil || !d.Cleanup.Complete || !d.Cleanup.hasProcess(msgs[0].Pid, "provider") {
		t.Errorf("data.cleanup %+v: want complete and listing provider %d", d.Cleanup, msgs[0].Pid)
	} else if d.Cleanup.ProtocolClose.Outcome != "skipped" {
		t.Errorf("protocolClose %q, want skipped (no session exists)", d.Cleanup.ProtocolClose.Outcome)
	}
	if n := len(seedRecv(msgs, "session/close")); n != 0 {
		t.Errorf("agent received %d session/close without a session", n)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// seedLateHandshake opens with an agent that answers session/new only once
// SIGTERM arrives (new-on-term), lets abort (cancel or timeout) end the
// handshake, and checks SEED-BEHAVIOR 6/7's late cleanup: the open fails
// with wantCode and a complete proof; the late session is closed with ACP
// session/close naming the id the agent created, and that cleanup is
// reported by cleanup/proof with reason "admission aborted". It returns
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
		p["handshakeTimeoutMs"] = 200
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

// TestAdmission_CancelDuringHandshakeClosesLateSession:
// SEED-BEHAVIOR 6 (T: aborts a blocked handshake…): `$/cancelRequest`
// during a blocked session/new rejects the open with the cancel reason
// (-32800 ADMISSION_ABORTED), terminates the provider, and the session the
// agent creates afterwards (it answers when SIGTERM arrives) is closed with
// reason "admission aborted" and reported by cleanup/proof.
func TestAdmission_CancelDuringHandshakeClosesLateSession(t *testing.T) {
	open, _ := seedLateHandshake(t, true)
	if open.Reason != "admission aborted" {
		t.Errorf("open's proof reason %q, want \"admission aborted\"", open.Reason)
	}
}

// TestAdmission_HandshakeTimeoutClosesLateSession:
// SEED-BEHAVIOR 7 (A: boundedSessionHandshake, lateHandshakeCleanup): a
// session/new that outlives handshakeTimeoutMs (200 ms) fails the open with
// ACPX_SESSION_HANDSHAKE_TIMEOUT; its late completion is closed and
// reported as in rule 6.
func TestAdmission_HandshakeTimeoutClosesLateSession(t *testing.T) {
	seedLateHandshake(t, false)
}

// TestAdmission_IdentityCheckedBeforeAdmission:
// SEED-BEHAVIOR 8 (T: fails closed…; A: requireIdentity): no backend
// session id → ACPX_IDENTITY_INVALID, cleanup reason "identity validation
// failed", provider gone, no record saved; no record id (empty sessionKey)
// → -32602 before anything runs; a missing agent session id falls back to
// the backend id, and a distinct one (_meta.agentSessionId) is kept.
func TestAdmission_IdentityCheckedBeforeAdmission(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)

	rec := seedRecordFile(t)
	d := seedWantError(t, "open without a session id", s.call("session/open", seedOpenParams(e, "no-id", rec, "no-session-id")),
		-32000, "ACPX_IDENTITY_INVALID")
	if d.Cleanup == nil || !d.Cleanup.Complete || d.Cleanup.Reason != "identity validation failed" || len(d.Cleanup.Processes) == 0 {
		t.Errorf("data.cleanup %+v: want complete, reason \"identity validation failed\", provider listed", d.Cleanup)
	}
	if _, err := os.Stat(e.recordPath("no-id")); !os.IsNotExist(err) {
		t.Errorf("a record was saved for a session without identity (stat err %v)", err)
	}

	rec = seedRecordFile(t)
	p := seedOpenParams(e, "", rec, "")
	if d := seedWantError(t, "open without a record id", s.call("session/open", p), -32602, ""); d.Field != "sessionKey" {
		t.Errorf("data.field %q, want sessionKey", d.Field)
	}
	if len(seedReadAgent(t, rec)) != 0 {
		t.Errorf("an open without a record id launched the agent")
	}

	rec = seedRecordFile(t)
	plain := seedMustOpen(s, seedOpenParams(e, "plain-id", rec, ""))
	msgs := seedReadAgent(t, rec)
	created := ""
	if news := seedRecv(msgs, "session/new"); len(news) == 1 {
		if r := seedReply(msgs, news[0].Msg.ID); r != nil {
			created = seedSessionIDOf(r.Msg.Result)
		}
	}
	if id := plain.Identity; id.AcpxRecordID != "plain-id" || id.BackendSessionID == "" || id.BackendSessionID != created || id.AgentSessionID != id.BackendSessionID {
		t.Errorf("identity %+v: want record id plain-id, backend = agent = %q", id, created)
	}

	distinct := seedMustOpen(s, seedOpenParams(e, "agent-id", seedRecordFile(t), "agent-session-id=agent-side-8"))
	if id := distinct.Identity; id.AgentSessionID != "agent-side-8" || id.BackendSessionID == "" || id.BackendSessionID == id.AgentSessionID {
		t.Errorf("identity %+v: want backend fa-… and agent agent-side-8", id)
	}
	seedCloseProof(t, s, plain.Session, nil)
	seedCloseProof(t, s, distinct.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAdmission_RecordSaveFailureClosesCreatedSession:
// SEED-BEHAVIOR 9 (T: closes a newly created session when its record save
// rejects): the record path is a directory, so the save fails; the open
// fails STORE_UNAVAILABLE and the session the agent created is closed with
// that identity (ACP session/close naming it, protocolClose ok), provider
// gone.
func TestAdmission_RecordSaveFailureClosesCreatedSession(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	if err := os.MkdirAll(e.recordPath("unsavable"), 0o700); err != nil {
		t.Fatal(err)
	}
	rec := seedRecordFile(t)
	d := seedWantError(t, "open whose record save fails", s.call("session/open", seedOpenParams(e, "unsavable", rec, "")),
		-32000, "STORE_UNAVAILABLE")
	if d.Cleanup == nil || !d.Cleanup.Complete || d.Cleanup.ProtocolClose.Outcome != "ok" {
		t.Errorf("data.cleanup %+v: want complete with protocolClose ok", d.Cleanup)
	}
	msgs := seedReadAgent(t, rec)
	created := ""
	if news := seedRecv(msgs, "session/new"); len(news) == 1 {
		if r := seedReply(msgs, news[0].Msg.ID); r != nil {
			created = seedSessionIDOf(r.Msg.Result)
		}
	}
	closes := seedRecv(msgs, "session/close")
	if created == "" || len(closes) != 1 || seedSessionIDOf(closes[0].Msg.Params) != created {
		t.Errorf("created session %q: session/close requests %v, want one naming it", created, closes)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAdmission_RecoveredSessionHandshakeFailureClosesRecoveredIdentity:
// SEED-BEHAVIOR 10 (T: closes a recovered session…): a record exists, the
// reopen loads it (session/load with the recorded id) and the agent
// refuses; the open fails ACPX_SESSION_ENSURE_FAILED, the recovered session
// is closed by ACP session/close with the recovered id, the cleanup reason
// is "session handshake failed", and the record file is byte-for-byte
// unchanged (nothing saved).
func TestAdmission_RecoveredSessionHandshakeFailureClosesRecoveredIdentity(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	agentState := t.TempDir()
	p := e.openParams("recovered", "")
	p["command"] = map[string]any{"path": faultBin, "args": []string{"--mode", "normal", "--state-dir", agentState}}
	first := seedMustOpen(s, p)
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": first.Session, "requestId": "t1", "prompt": "hi"}, &res)
	seedCloseProof(t, s, first.Session, nil)
	before, err := os.ReadFile(e.recordPath("recovered"))
	if err != nil {
		t.Fatal(err)
	}

	rec := seedRecordFile(t) // this agent has no state dir: session/load fails
	d := seedWantError(t, "reopen whose session/load fails", s.call("session/open", seedOpenParams(e, "recovered", rec, "")),
		-32000, "ACPX_SESSION_ENSURE_FAILED")
	if d.Cleanup == nil || !d.Cleanup.Complete || d.Cleanup.Reason != "session handshake failed" || d.Cleanup.ProtocolClose.Outcome != "ok" {
		t.Errorf("data.cleanup %+v: want complete, reason \"session handshake failed\", protocolClose ok", d.Cleanup)
	}
	msgs := seedReadAgent(t, rec)
	loads, closes := seedRecv(msgs, "session/load"), seedRecv(msgs, "session/close")
	if len(loads) != 1 || seedSessionIDOf(loads[0].Msg.Params) != first.Identity.BackendSessionID {
		t.Errorf("session/load requests %v, want one for %s", loads, first.Identity.BackendSessionID)
	}
	if len(closes) != 1 || seedSessionIDOf(closes[0].Msg.Params) != first.Identity.BackendSessionID {
		t.Errorf("session/close requests %v, want one with the recovered id %s", closes, first.Identity.BackendSessionID)
	}
	if n := len(seedRecv(msgs, "session/new")); n != 0 {
		t.Errorf("a failed recovery fell back to session/new (%d)", n)
	}
	after, err := os.ReadFile(e.recordPath("recovered"))
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the record changed after a failed recovery (err %v)", err)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAdmission_StalledCloseBoundedAndErrorsAggregated:
// SEED-BEHAVIOR 11 (T: bounds a stalled runtime close…): the handshake
// fails after a session exists (requested model unavailable) and the
// agent never answers session/close: the close is bounded by
// --close-timeout-ms (outcome "timeout", one attempt), the provider is then
// terminated (proof complete), and the open's error aggregates both: data.causes
// [MODEL_UNAVAILABLE, PROTOCOL_CLOSE_TIMEOUT] and a message saying the
// handshake and its cleanup failed.
func TestAdmission_StalledCloseBoundedAndErrorsAggregated(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	rec := seedRecordFile(t)
	p := seedOpenParams(e, "stalled-close", rec, "hang-close")
	p["model"] = "no-such-model"
	d := seedWantError(t, "open with an unavailable model and a stalled close", s.call("session/open", p), -32000, "MODEL_UNAVAILABLE")
	if d.Cleanup == nil || !d.Cleanup.Complete || d.Cleanup.ProtocolClose.Outcome != "timeout" || len(d.Cleanup.Processes) == 0 {
		t.Fatalf("data.cleanup %+v: want complete, protocolClose timeout, provider listed", d.Cleanup)
	}
	if len(d.Causes) != 2 || d.Causes[0].Code != "MODEL_UNAVAILABLE" || d.Causes[1].Code != "PROTOCOL_CLOSE_TIMEOUT" {
		t.Errorf("data.causes %+v, want [MODEL_UNAVAILABLE PROTOCOL_CLOSE_TIMEOUT]", d.Causes)
	}
	if !strings.Contains(d.Message, "handshake and") || !strings.Contains(d.Message, "cleanup failed") || !strings.Contains(d.Message, "no-such-model") {
		t.Errorf("message %q does not aggregate the handshake and cleanup failures", d.Message)
	}
	if n := len(seedRecv(seedReadAgent(t, rec), "session/close")); n != 1 {
		t.Errorf("agent received %d session/close, want exactly 1 (a timed-out close is never retried)", n)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAdmission_FailedHandshakeErrorsAggregatedInOrder:
// SEED-BEHAVIOR 12 (T: aggregates asynchronous provider signal errors…):
// the open's data.causes are the handshake error first, then the cleanup's
// errors exactly in proof order: the protocol-close timeout, each
// signal-delivery error (SIGNAL_DELIVERY_FAILED, one per `signals[].error`),
// then "provider did not exit after SIGKILL" (PROVIDER_KILL_TIMEOUT). The
// last is provoked for real: a provider that ignores SIGTERM and needs
// milliseconds to exit after SIGKILL, with --kill-grace-ms 1. A failed
// signal delivery cannot be provoked here (the sidecar is root and signals
// its own live tree through pidfds/cgroup.kill), so the test asserts that
// any present sit between the close error and the kill timeout and match
// the failed signals. The retained cleanup then proves the tree gone.
func TestAdmission_FailedHandshakeErrorsAggregatedInOrder(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedShortGraceArgs(e)...)
	s.initialize(false)
	p := seedOpenParams(e, "aggregate", seedRecordFile(t), "hang-close,"+seedHogModes)
	p["model"] = "no-such-model"
	d := seedWantError(t, "open failing handshake, close and kill", s.call("session/open", p), -32000, "MODEL_UNAVAILABLE")
	if d.Cleanup == nil {
		t.Fatalf("no data.cleanup")
	}
	if len(d.Causes) < 3 || d.Causes[0].Code != "MODEL_UNAVAILABLE" || !strings.Contains(d.Causes[0].Message, "no-such-model") {
		t.Fatalf("data.causes %+v: want the handshake error first, then the cleanup errors", d.Causes)
	}
	if got, want := fmt.Sprint(d.Causes[1:]), fmt.Sprint(d.Cleanup.Errors); got != want {
		t.Errorf("data.causes after the handshake error %s, want the proof's errors in order %s", got, want)
	}
	codes := d.Cleanup.errorCodes()
	last := codes[len(codes)-1]
	if codes[0] != "PROTOCOL_CLOSE_TIMEOUT" || last != "PROVIDER_KILL_TIMEOUT" {
		t.Errorf("cleanup error codes %v: want PROTOCOL_CLOSE_TIMEOUT first and PROVIDER_KILL_TIMEOUT last", codes)
	}
	if !strings.Contains(d.Causes[len(d.Causes)-1].Message, "did not exit after SIGKILL") {
		t.Errorf("last cause %+v, want \"did not exit after SIGKILL\"", d.Causes[len(d.Causes)-1])
	}
	failedSignals, deliveryErrors := 0, 0
	for _, sg := range d.Cleanup.Signals {
		if sg.Error != "" {
			failedSignals++
		}
	}
	for _, c := range codes[1 : len(codes)-1] {
		if c != "SIGNAL_DELIVERY_FAILED" {
			t.Errorf("cleanup error %q between the close timeout and the kill timeout; only signal-delivery errors belong there (%v)", c, codes)
		}
		deliveryErrors++
	}
	if failedSignals > 0 && deliveryErrors == 0 {
		t.Errorf("%d signals failed but no SIGNAL_DELIVERY_FAILED cause is reported", failedSignals)
	}
	if d.Cleanup.Complete {
		t.Errorf("a proof with PROVIDER_KILL_TIMEOUT claims complete: %+v", d.Cleanup)
	}
	final := seedWaitProof(s, func(pr seedProof) bool { return pr.Session == d.Cleanup.Session && pr.Complete })
	if !final.Verified.TreeEmpty {
		t.Errorf("final proof %+v does not verify the tree empty", final)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAdmission_UnknownAgentRefusedBeforeAnythingIsConstructed:
// SEED-BEHAVIOR 13 (T: rejects non-Codex profiles): unknown or
// unqualified profile names (case, spacing, executable names) get -32000
// UNKNOWN_AGENT before anything exists: the stateDir is not even created,
// the agent never runs, no session is listed; an empty agent is -32602
// field agent.
func TestAdmission_UnknownAgentRefusedBeforeAnythingIsConstructed(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	for _, agent := range []string{"no-such-agent", "Codex", " codex", "codex ", "codex-acp", "GENERIC", "generic/codex"} {
		rec := seedRecordFile(t)
		p := seedOpenParams(e, "unknown-agent", rec, "")
		p["agent"] = agent
		stateDir := filepath.Join(t.TempDir(), "never-created")
		p["stateDir"] = stateDir
		seedWantError(t, fmt.Sprintf("open with agent %q", agent), s.call("session/open", p), -32000, "UNKNOWN_AGENT")
		if _, err := os.Stat(stateDir); !os.IsNotExist(err) {
			t.Errorf("agent %q: the stateDir was created before the profile was checked (stat err %v)", agent, err)
		}
		if len(seedReadAgent(t, rec)) != 0 {
			t.Errorf("agent %q: the command ran", agent)
		}
	}
	p := seedOpenParams(e, "empty-agent", seedRecordFile(t), "")
	p["agent"] = ""
	if d := seedWantError(t, "open with an empty agent", s.call("session/open", p), -32602, ""); d.Field != "agent" {
		t.Errorf("data.field %q, want agent", d.Field)
	}
	if l := listSessions(s); len(l) != 0 {
		t.Errorf("session/list after refused opens: %v", l)
	}
	if left := markedPids(e.mark, ""); len(left) != 0 {
		t.Errorf("processes launched for refused profiles: %v", left)
	}
}

// TestAdmission_AgentRejectionClassifiedAndRedacted:
// SEED-BEHAVIOR 14 (A: classifySessionEnsureFailure, acpxProviderFailure):
// an agent that rejects session/new with a message quoting the launch
// secret (it expands $SEED_SECRET from its environment) fails the open
// with ACPX_SESSION_ENSURE_FAILED whose message keeps the provider's
// explanation with the secret replaced by "[redacted]"; the secret is in
// no frame, log or file — though the agent's record proves it sent it.
func TestAdmission_AgentRejectionClassifiedAndRedacted(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	secret := "sk-seed14-" + randHex(12)
	rec := seedRecordFile(t)
	p := seedOpenParams(e, "redacted", rec, "error-new=invalid api key ${SEED_SECRET} for this account")
	seedEnv(p)["SEED_SECRET"] = secret
	d := seedWantError(t, "open rejected by the agent", s.call("session/open", p), -32000, "ACPX_SESSION_ENSURE_FAILED")
	if strings.Contains(d.Message, secret) {
		t.Fatalf("the error message carries the launch secret")
	}
	if !strings.Contains(d.Message, "invalid api key [redacted] for this account") {
		t.Errorf("message %q does not keep the redacted provider explanation", d.Message)
	}
	sentIt := false
	for _, m := range seedReadAgent(t, rec) {
		sentIt = sentIt || (m.Dir == "sent" && m.Msg.Error != nil && strings.Contains(m.Msg.Error.Message, secret))
	}
	if !sentIt {
		t.Errorf("the agent's rejection did not carry the secret; the redaction was not exercised")
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	grepSecret(t, secret, e.stateDir, s.allOutput())
}

// TestAdmission_WhitespaceDistinctRecordIdsAreDistinct:
// SEED-BEHAVIOR 19 (T: keeps exact record ids distinct when whitespace
// differs): "ws", " ws", "ws " and " ws " are four live sessions at once
// (no SESSION_KEY_IN_USE), with four backend sessions and four record
// files whose acpx_record_id is each key exactly; closing one leaves the
// others open.
func TestAdmission_WhitespaceDistinctRecordIdsAreDistinct(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	keys := []string{"ws", " ws", "ws ", " ws "}
	opened := map[string]seedOpen{}
	backends := map[string]bool{}
	for _, k := range keys {
		o := seedMustOpen(s, e.openParams(k, ""))
		if o.Identity.AcpxRecordID != k || o.SessionKey != k {
			t.Errorf("key %q: identity record id %q sessionKey %q", k, o.Identity.AcpxRecordID, o.SessionKey)
		}
		opened[k] = o
		backends[o.Identity.BackendSessionID] = true
	}
	if len(backends) != len(keys) {
		t.Errorf("%d distinct backend sessions for %d keys", len(backends), len(keys))
	}
	for _, k := range keys {
		rec := seedReadJSON(t, e.recordPath(k))
		if rec["acpx_record_id"] != k || rec["acp_session_id"] != opened[k].Identity.BackendSessionID {
			t.Errorf("record for %q names %q / %v", k, rec["acpx_record_id"], rec["acp_session_id"])
		}
	}
	seedCloseProof(t, s, opened[" ws"].Session, nil)
	for _, k := range []string{"ws", "ws ", " ws "} {
		var st struct {
			State string `json:"state"`
		}
		s.mustCall("session/status", map[string]any{"session": opened[k].Session}, &st)
		if st.State != "open" {
			t.Errorf("closing \" ws\" changed %q to state %q", k, st.State)
		}
		seedCloseProof(t, s, opened[k].Session, nil)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// ------------------------------------------------------------------ cleanup

// TestCleanup_RetainedUntilTreeProvenGone:
// SEED-BEHAVIOR 15 (T: retains failed ordinary admission cleanup until a
// retry succeeds): a provider whose exit outlasts --kill-grace-ms 1 makes
// the first cleanup fail. For a failed open the error reports both the
// original error and the cleanup error (data.causes), the proof is
// incomplete, and the retained cleanup keeps retrying until the tree is
// observed empty: cleanup/proof with the same cleanupId, complete, more than
// one attempt. For a close the reply is CLEANUP_INCOMPLETE with that proof,
// the final proof follows as cleanup/proof, and a later close returns it.
func TestCleanup_RetainedUntilTreeProvenGone(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedShortGraceArgs(e)...)
	s.initialize(false)

	d := seedWantError(t, "open rejected by the agent, slow to die", s.call("session/open",
		seedOpenParams(e, "retained-open", seedRecordFile(t), "error-new=refused,"+seedHogModes)), -32000, "ACPX_SESSION_ENSURE_FAILED")
	if d.Cleanup == nil || d.Cleanup.Complete {
		t.Fatalf("data.cleanup %+v: want an incomplete proof", d.Cleanup)
	}
	codes := []string{}
	for _, c := range d.Causes {
		codes = append(codes, c.Code)
	}
	if len(codes) < 2 || codes[0] != "ACPX_SESSION_ENSURE_FAILED" || codes[len(codes)-1] != "PROVIDER_KILL_TIMEOUT" {
		t.Errorf("data.causes %v: want the original error, then the cleanup error", codes)
	}
	final := seedWaitProof(s, func(pr seedProof) bool { return pr.Session == d.Cleanup.Session && pr.Complete })
	if final.CleanupID != d.Cleanup.CleanupID || final.Attempts < 2 || !final.Verified.TreeEmpty {
		t.Errorf("final proof cleanupId %q attempts %d verified %+v; want %q, >1, tree empty", final.CleanupID, final.Attempts, final.Verified, d.Cleanup.CleanupID)
	}

	o := seedMustOpen(s, e.openParams("retained-close", seedHogModes))
	cd := seedWantError(t, "close of a slow-to-die provider", seedClose(s, o.Session, nil), -32000, "CLEANUP_INCOMPLETE")
	if cd.Proof == nil || cd.Proof.Complete {
		t.Fatalf("data.proof %+v: want an incomplete proof", cd.Proof)
	}
	final = seedWaitProof(s, func(pr seedProof) bool { return pr.Session == o.Session && pr.Complete })
	if final.CleanupID != cd.Proof.CleanupID || final.Attempts < 2 {
		t.Errorf("final close proof cleanupId %q attempts %d; want %q, >1", final.CleanupID, final.Attempts, cd.Proof.CleanupID)
	}
	if again := seedCloseProof(t, s, o.Session, nil); again.CleanupID != final.CleanupID || !again.Complete {
		t.Errorf("close after the retained cleanup finished: %+v, want the final proof %s", again, final.CleanupID)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestCleanup_OneProtocolCloseInFlightPerTarget:
// SEED-BEHAVIOR 16 (T: retries retained admission cleanup after the first
// close times out; retains ownership of a late close until its exact
// attempt settles): a close that outlives --close-timeout-ms stays the
// target's only attempt (the agent receives exactly one session/close;
// protocolClose "timeout"); a close answered with an error is retried only
// after that answer — the agent's record shows strictly alternating
// session/close request and answer — until one succeeds.
func TestCleanup_OneProtocolCloseInFlightPerTarget(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)

	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "hung-close", rec, "hang-close"))
	pr := seedCloseProof(t, s, o.Session, nil)
	if pr.ProtocolClose.Outcome != "timeout" || !pr.Complete {
		t.Errorf("proof protocolClose %+v complete %v, want timeout and complete", pr.ProtocolClose, pr.Complete)
	}
	if n := len(seedRecv(seedReadAgent(t, rec), "session/close")); n != 1 {
		t.Errorf("agent received %d session/close after a timed-out close, want 1", n)
	}

	rec = seedRecordFile(t)
	o = seedMustOpen(s, seedOpenParams(e, "flaky-close", rec, "error-close=2"))
	pr = seedCloseProof(t, s, o.Session, nil)
	if pr.ProtocolClose.Outcome != "ok" || !pr.Complete {
		t.Errorf("proof protocolClose %+v complete %v, want ok after retries", pr.ProtocolClose, pr.Complete)
	}
	var seq []string
	for _, m := range seedReadAgent(t, rec) {
		switch {
		case m.Dir == "recv" && m.Msg.Method == "session/close":
			seq = append(seq, "close")
		case m.Dir == "sent" && m.Msg.Method == "" && m.Msg.Error != nil && strings.Contains(m.Msg.Error.Message, "close failed"):
			seq = append(seq, "error")
		case m.Dir == "sent" && m.Msg.Method == "" && string(m.Msg.Result) == "{}":
			seq = append(seq, "ok")
		}
	}
	if got := strings.Join(seq, ","); got != "close,error,close,error,close,ok" {
		t.Errorf("session/close traffic %s, want close,error,close,error,close,ok (one attempt in flight at a time)", got)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestCleanup_OneCleanupOwnerPerRecordId:
// SEED-BEHAVIOR 17 (T: coalesces store and late-handshake cleanup…). The
// sidecar keys cleanup ownership by sessionKey (= record id) and holds the
// key until that cleanup is proven, so two cleanups of one record cannot
// run side by side. Observable consequences: (1) while a retained cleanup
// of key K runs, an open of K is refused SESSION_KEY_IN_USE and launches
// nothing, and once the final proof is out K opens again; (2) a late
// handshake's cleanup and the admission's cleanup of the same record share
// one tree termination (identical signals and processes in both proofs).
func TestCleanup_OneCleanupOwnerPerRecordId(t *testing.T) {
	t.Run("key-held-while-cleanup-retained", func(t *testing.T) {
		e := newFaultEnv(t)
		s := startSidecar(t, seedShortGraceArgs(e)...)
		s.initialize(false)
		rec := seedRecordFile(t)
		d := seedWantError(t, "open with a retained cleanup", s.call("session/open",
			seedOpenParams(e, "K", rec, "error-new=refused,"+seedHogModes)), -32000, "ACPX_SESSION_ENSURE_FAILED")
		if d.Cleanup == nil || d.Cleanup.Complete {
			t.Fatalf("data.cleanup %+v: want incomplete (retained)", d.Cleanup)
		}
		again := seedOpenParams(e, "K", rec, "")
		id := s.start("session/open", again)
		f := s.await(id, 30*time.Second)
		replyAt := seedFrameIndex(s, func(fr *frame) bool { return string(fr.ID) == id && fr.Method == "" })
		proofAt := seedFrameIndex(s, func(fr *frame) bool {
			var n struct {
				Proof seedProof `json:"proof"`
			}
			return fr.Method == "cleanup/proof" && json.Unmarshal(fr.Params, &n) == nil && n.Proof.Session == d.Cleanup.Session && n.Proof.Complete
		})
		switch {
		case f.Error != nil:
			seedWantError(t, "open of a key whose cleanup is retained", f, -32000, "SESSION_KEY_IN_USE")
			if proofAt >= 0 && proofAt < replyAt {
				t.Errorf("SESSION_KEY_IN_USE after the cleanup of that key was already proven")
			}
			starts := 0
			for _, m := range seedReadAgent(t, rec) {
				if m.Dir == "start" {
					starts++
				}
			}
			if starts != 1 {
				t.Errorf("the refused open launched the agent (%d starts)", starts)
			}
		case proofAt < 0 || proofAt > replyAt:
			t.Errorf("an open of K succeeded while K's previous cleanup was still retained (cleanup/proof at frame %d, reply at %d)", proofAt, replyAt)
		default:
			t.Logf("the retained cleanup was proven before the second open arrived; the key-in-use window was not hit")
			seedCloseProof(t, s, decodeResult[seedOpen](t, "reopen", f).Session, nil)
		}
		seedWaitProof(s, func(pr seedProof) bool { return pr.Session == d.Cleanup.Session && pr.Complete })
		if f.Error != nil {
			o := seedMustOpen(s, e.openParams("K", ""))
			seedCloseProof(t, s, o.Session, nil)
		}
		waitNoMarked(t, e.mark, e.work, 10*time.Second)
	})
	t.Run("late-handshake-shares-the-record-cleanup", func(t *testing.T) {
		open, late := seedLateHandshake(t, false)
		if fmt.Sprint(open.Signals) != fmt.Sprint(late.Signals) || fmt.Sprint(open.Processes) != fmt.Sprint(late.Processes) {
			t.Errorf("late-handshake proof has its own termination:\n open %+v %+v\n late %+v %+v", open.Signals, open.Processes, late.Signals, late.Processes)
		}
		if open.SessionKey != late.SessionKey || open.Session != late.Session {
			t.Errorf("proofs name different records: %q/%q vs %q/%q", open.SessionKey, open.Session, late.SessionKey, late.Session)
		}
	})
}

// TestCleanup_SessionKeyIsTheRecordIdentityWithBothIdsKept:
// SEED-BEHAVIOR 18 (T: promotes a session fallback into the later durable
// record lifecycle). In the sidecar a session is known by its sessionKey
// from the first frame, and that key IS the record id, so "promotion" is
// structural; what must hold is that the merged identity keeps both ids:
// the open result, session/status, the record on disk (acpx_record_id,
// acp_session_id, agent_session_id) and the close proof all name the same
// record id, backend id and distinct agent id, also after close.
func TestCleanup_SessionKeyIsTheRecordIdentityWithBothIdsKept(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := seedMustOpen(s, e.openParams("promoted", "agent-session-id=agent-18"))
	id := o.Identity
	if id.AcpxRecordID != "promoted" || id.AgentSessionID != "agent-18" || id.BackendSessionID == "" {
		t.Fatalf("identity %+v", id)
	}
	var st struct {
		Identity struct {
			AcpxRecordID     string `json:"acpxRecordId"`
			BackendSessionID string `json:"backendSessionId"`
			AgentSessionID   string `json:"agentSessionId"`
		} `json:"identity"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.Identity != id {
		t.Errorf("status identity %+v, open identity %+v", st.Identity, id)
	}
	check := func(when string) {
		rec := seedReadJSON(t, e.recordPath("promoted"))
		if rec["acpx_record_id"] != "promoted" || rec["acp_session_id"] != id.BackendSessionID || rec["agent_session_id"] != "agent-18" {
			t.Errorf("record %s: acpx_record_id %v acp_session_id %v agent_session_id %v", when, rec["acpx_record_id"], rec["acp_session_id"], rec["agent_session_id"])
		}
	}
	check("while open")
	if pr := seedCloseProof(t, s, o.Session, nil); pr.SessionKey != "promoted" || pr.Session != o.Session || !pr.Complete {
		t.Errorf("close proof sessionKey %q session %q complete %v", pr.SessionKey, pr.Session, pr.Complete)
	}
	check("after close")
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestCleanup_ProcessTerminationOutlivesProtocolCloseBudget:
// SEED-BEHAVIOR 20 (T: retains cleanup beyond the former … retry budget;
// retains provider cleanup beyond the former retry budget): protocol-close
// retries stop at the attempt budget (default 4: the agent receives exactly
// four session/close, the proof says "error" and lists
// PROTOCOL_CLOSE_FAILED), but process termination does not: with
// --protocol-close-attempts 1 and a provider slow to die, the close's
// proof is incomplete, and termination is retried until the tree is gone
// (final cleanup/proof complete with attempts > 1), still reporting the
// terminal protocol error.
func TestCleanup_ProcessTerminationOutlivesProtocolCloseBudget(t *testing.T) {
	t.Run("protocol-close-budget", func(t *testing.T) {
		e := newFaultEnv(t)
		s := startSidecar(t, seedArgs(e)...)
		s.initialize(false)
		rec := seedRecordFile(t)
		o := seedMustOpen(s, seedOpenParams(e, "close-always-fails", rec, "error-close=100"))
		pr := seedCloseProof(t, s, o.Session, nil)
		if pr.ProtocolClose.Outcome != "error" || !pr.Complete || !strings.Contains(fmt.Sprint(pr.errorCodes()), "PROTOCOL_CLOSE_FAILED") {
			t.Errorf("proof protocolClose %+v complete %v errors %v", pr.ProtocolClose, pr.Complete, pr.errorCodes())
		}
		if n := len(seedRecv(seedReadAgent(t, rec), "session/close")); n != 4 {
			t.Errorf("agent received %d session/close, want the budget of 4", n)
		}
		waitNoMarked(t, e.mark, e.work, 10*time.Second)
	})
	t.Run("termination-beyond-budget", func(t *testing.T) {
		e := newFaultEnv(t)
		s := startSidecar(t, seedShortGraceArgs(e, "--protocol-close-attempts", "1")...)
		s.initialize(false)
		rec := seedRecordFile(t)
		o := seedMustOpen(s, seedOpenParams(e, "beyond-budget", rec, "error-close=100,"+seedHogModes))
		d := seedWantError(t, "close of a slow-to-die provider", seedClose(s, o.Session, nil), -32000, "CLEANUP_INCOMPLETE")
		if d.Proof == nil || d.Proof.Complete || d.Proof.Attempts != 1 {
			t.Fatalf("data.proof %+v: want incomplete after 1 attempt", d.Proof)
		}
		final := seedWaitProof(s, func(pr seedProof) bool { return pr.Session == o.Session && pr.Complete })
		if final.Attempts <= 1 || !strings.Contains(fmt.Sprint(final.errorCodes()), "PROTOCOL_CLOSE_FAILED") || final.ProtocolClose.Outcome != "error" {
			t.Errorf("final proof attempts %d errors %v protocolClose %+v: want >1 attempts and the protocol error kept",
				final.Attempts, final.errorCodes(), final.ProtocolClose)
		}
		if n := len(seedRecv(seedReadAgent(t, rec), "session/close")); n != 1 {
			t.Errorf("agent received %d session/close with a budget of 1", n)
		}
		waitNoMarked(t, e.mark, e.work, 10*time.Second)
	})
}

// TestCleanup_SealedSupervisorLaunchesNothing:
// SEED-BEHAVIOR 21 (A: SpawnedChildSet.add post-seal): shutdown seals the
// supervisor; an open still verifying its command (sha256 of a 128 MiB
// sparse-padded copy of the agent, which takes the sidecar a while) when
// shutdown arrives reaches the spawn only after the seal, and that spawn
// fails: SHUTTING_DOWN with a complete "nothing was launched" proof, the
// agent never ran, and the sidecar exits 0.
func TestCleanup_SealedSupervisorLaunchesNothing(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	big := filepath.Join(t.TempDir(), "faultagent-padded")
	bin, err := os.ReadFile(faultBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 128<<20); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(big)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	rec := seedRecordFile(t)
	p := e.openParams("after-seal", "")
	p["command"] = map[string]any{"path": big, "args": []string{"--mode", "record=" + rec}, "sha256": hex.EncodeToString(h.Sum(nil))}
	openID := s.start("session/open", p)
	shutID := s.start("shutdown", map[string]any{})
	d := seedWantError(t, "open racing shutdown", s.await(openID, 30*time.Second), -32000, "SHUTTING_DOWN")
	if d.Cleanup == nil || !d.Cleanup.Complete || d.Cleanup.Verified.Method != "nothing was launched" {
		t.Errorf("data.cleanup %+v: want complete, nothing launched", d.Cleanup)
	}
	decodeResult[map[string]any](t, "shutdown", s.await(shutID, 30*time.Second))
	s.send(map[string]any{"jsonrpc": "2.0", "method": "exit"})
	if st := s.exitStatus(30 * time.Second); st != 0 {
		t.Errorf("exit status %d, want 0", st)
	}
	if msgs := seedReadAgent(t, rec); len(msgs) != 0 {
		t.Errorf("the agent ran after the supervisor was sealed")
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestCleanup_GroupTerminatedAfterLeaderExits:
// SEED-BEHAVIOR 22 (T: terminates the provider process group after its
// leader exits; A: guardian notes): the provider leaves a child in its own
// process group that ignores SIGTERM, then dies mid-turn. After the leader
// is gone (its pid, and so the group id, could be recycled) the group is
// still ended: the provider-exit proof is complete and lists that child as
// a descendant, and nothing survives. Pid recycling itself cannot be forced
// here; the test shows the consequence that signalling goes through pinned
// identities (cgroup or pidfd) rather than a bare kill(-pgid). Run under
// the default containment and under process-group containment.
func TestCleanup_GroupTerminatedAfterLeaderExits(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{{"default", nil}, {"process-group", []string{"--containment", "process-group"}}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFaultEnv(t)
			s := startSidecar(t, seedArgs(e, tc.args...)...)
			s.initialize(false)
			o := seedMustOpen(s, e.openParams("leader-exits", "groupchild,crash-mid-turn"))
			child := 0
			for _, pid := range markedPids(e.mark, "") {
				if pid != o.Process.Pid {
					child = pid
				}
			}
			if child == 0 {
				t.Fatalf("no group child besides the provider %d", o.Process.Pid)
			}
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
			fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			if pgrp, _ := strconv.Atoi(fields[2]); pgrp != o.Process.Pid {
				t.Fatalf("child %d is in group %d, want the provider's group %d", child, pgrp, o.Process.Pid)
			}
			var res turnResult
			s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "crash"}, &res)
			pr := seedWaitProof(s, func(p seedProof) bool { return p.Session == o.Session })
			if pr.Origin != "provider-exit" || !pr.Complete || !pr.hasProcess(child, "descendant") {
				t.Errorf("provider-exit proof origin %q complete %v processes %+v; want complete, listing descendant %d", pr.Origin, pr.Complete, pr.Processes, child)
			}
			waitNoMarked(t, e.mark, e.work, 10*time.Second)
		})
	}
}

// TestCleanup_LateCloseFailureAfterTimeoutRevivesNothing:
// SEED-BEHAVIOR 29 (A: watchPendingAttempt,
// scheduleLateFailureReconciliation). In the sidecar a protocol close that
// outlives --close-timeout-ms is followed by terminating the tree, so the
// close's late failure (the agent answers session/close with an error
// once SIGTERM arrives — its record shows it did) finds nothing to revive:
// the proof is complete, a second close returns the same proof, no
// cleanup/proof is ever sent for the session (checked after shutdown, which
// waits for every retained cleanup), shutdown repeats no proof for it, and
// the sidecar exits 0.
func TestCleanup_LateCloseFailureAfterTimeoutRevivesNothing(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "late-close-failure", rec, "close-error-on-term"))
	pr := seedCloseProof(t, s, o.Session, nil)
	if pr.ProtocolClose.Outcome != "timeout" || !pr.Complete {
		t.Fatalf("proof protocolClose %+v complete %v, want timeout and complete", pr.ProtocolClose, pr.Complete)
	}
	msgs := seedReadAgent(t, rec)
	closes := seedRecv(msgs, "session/close")
	if len(closes) != 1 {
		t.Fatalf("agent received %d session/close, want 1", len(closes))
	}
	if r := seedReply(msgs, closes[0].Msg.ID); r == nil || r.Msg.Error == nil {
		t.Errorf("the agent did not produce the late close failure")
	}
	if again := seedCloseProof(t, s, o.Session, nil); again.CleanupID != pr.CleanupID {
		t.Errorf("second close proof %q, want the first %q", again.CleanupID, pr.CleanupID)
	}
	proofs, status := s.shutdownAndExit()
	for _, p := range proofs {
		if p.Session == o.Session {
			t.Errorf("shutdown repeated a proof for the closed session: %+v", p)
		}
	}
	if status != 0 {
		t.Errorf("exit status %d, want 0", status)
	}
	if n := seedProofNotes(s, o.Session); len(n) != 0 {
		t.Errorf("%d cleanup/proof notifications after a late close failure, want none: %+v", len(n), n)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// ------------------------------------------------------------------ running

// TestRunning_StatusMapsPersistedRecordAndVerifiesIdentity:
// SEED-BEHAVIOR 23 (T: maps status…; A: persistedRuntimeStatus): status
// reports the record's models, usage (cumulative and per request) and last
// request id; a value changed on disk shows in status (it is read from the
// record); a record naming another ACP session gives
// ACPX_PERSISTED_SESSION_IDENTITY_MISMATCH and a missing one
// ACPX_PERSISTED_SESSION_MISSING.
func TestRunning_StatusMapsPersistedRecordAndVerifiesIdentity(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := seedMustOpen(s, e.openParams("status", ""))
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "hi"}, &res)
	type status struct {
		State         string  `json:"state"`
		LastRequestID *string `json:"lastRequestId"`
		Models        *struct {
			CurrentModelID string `json:"currentModelId"`
		} `json:"models"`
		Usage struct {
			Cumulative struct {
				TotalTokens int64 `json:"totalTokens"`
			} `json:"cumulative"`
			PerRequest map[string]struct {
				TotalTokens int64 `json:"totalTokens"`
			} `json:"perRequest"`
		} `json:"usage"`
	}
	var st status
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.LastRequestID == nil || *st.LastRequestID != "t1" || st.Usage.Cumulative.TotalTokens != 15 ||
		st.Usage.PerRequest["t1"].TotalTokens != 15 || st.Models == nil || st.Models.CurrentModelID != "fa-model" || st.State != "open" {
		t.Errorf("status %+v: want open, lastRequestId t1, 15 tokens cumulative and for t1, model fa-model", st)
	}
	path := e.recordPath("status")
	edit := func(fn func(m map[string]any)) {
		m := seedReadJSON(t, path)
		fn(m)
		b, _ := json.Marshal(m)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	edit(func(m map[string]any) {
		m["last_request_id"] = "from-disk"
		m["cumulative_token_usage"] = map[string]any{"input_tokens": 1, "output_tokens": 2, "total_tokens": 99}
	})
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.LastRequestID == nil || *st.LastRequestID != "from-disk" || st.Usage.Cumulative.TotalTokens != 99 {
		t.Errorf("status after editing the record: lastRequestId %v cumulative %d, want from-disk / 99 (read from the record)",
			st.LastRequestID, st.Usage.Cumulative.TotalTokens)
	}
	edit(func(m map[string]any) { m["acp_session_id"] = "fa-someone-else" })
	seedWantError(t, "status with a record naming another session", s.call("session/status", map[string]any{"session": o.Session}),
		-32000, "ACPX_PERSISTED_SESSION_IDENTITY_MISMATCH")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	seedWantError(t, "status without a record", s.call("session/status", map[string]any{"session": o.Session}),
		-32000, "ACPX_PERSISTED_SESSION_MISSING")
	seedCloseProof(t, s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestRunning_SetModelThroughConfigOptionThenVerified:
// SEED-BEHAVIOR 24 (T: maps status, model selection…): setModel goes
// through the agent's `model` config option (session/set_config_option,
// never session/set_model, when the option exists) and is verified against
// the option the agent reports back: an agent that says yes but keeps the
// old value gets MODEL_UNAVAILABLE and the recorded model is unchanged;
// without a model option the legacy session/set_model is used; an unknown
// model is refused without asking the agent.
func TestRunning_SetModelThroughConfigOptionThenVerified(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	type models struct {
		Models struct {
			CurrentModelID string `json:"currentModelId"`
		} `json:"models"`
	}
	current := func(session string) string {
		var st models
		s.mustCall("session/status", map[string]any{"session": session}, &st)
		return st.Models.CurrentModelID
	}

	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "set-model", rec, ""))
	var m models
	s.mustCall("session/setModel", map[string]any{"session": o.Session, "model": "fa-large"}, &m)
	if m.Models.CurrentModelID != "fa-large" || current(o.Session) != "fa-large" {
		t.Errorf("setModel fa-large: result %q status %q", m.Models.CurrentModelID, current(o.Session))
	}
	msgs := seedReadAgent(t, rec)
	if sets := seedRecv(msgs, "session/set_config_option"); len(sets) != 1 || !strings.Contains(string(sets[0].Msg.Params), `"configId":"model"`) {
		t.Errorf("set_config_option requests %v, want one for configId model", sets)
	}
	if n := len(seedRecv(msgs, "session/set_model")); n != 0 {
		t.Errorf("legacy session/set_model used %d times although the model option exists", n)
	}
	seedWantError(t, "setModel to an unknown model", s.call("session/setModel", map[string]any{"session": o.Session, "model": "nope"}),
		-32000, "MODEL_UNAVAILABLE")
	if n := len(seedRecv(seedReadAgent(t, rec), "session/set_config_option")); n != 1 {
		t.Errorf("an unknown model was sent to the agent (%d set_config_option)", n)
	}

	stale := seedMustOpen(s, e.openParams("stale-model", "stale-config"))
	seedWantError(t, "setModel the agent does not apply", s.call("session/setModel", map[string]any{"session": stale.Session, "model": "fa-large"}),
		-32000, "MODEL_UNAVAILABLE")
	if c := current(stale.Session); c != "fa-model" {
		t.Errorf("unverified model selection recorded: status model %q, want fa-model", c)
	}

	rec = seedRecordFile(t)
	legacy := seedMustOpen(s, seedOpenParams(e, "legacy-model", rec, "no-config-options"))
	s.mustCall("session/setModel", map[string]any{"session": legacy.Session, "model": "fa-large"}, &m)
	if sets := seedRecv(seedReadAgent(t, rec), "session/set_model"); len(sets) != 1 || !strings.Contains(string(sets[0].Msg.Params), `"modelId":"fa-large"`) {
		t.Errorf("legacy set_model requests %v, want one for fa-large", sets)
	}
	if m.Models.CurrentModelID != "fa-large" {
		t.Errorf("legacy setModel result %q", m.Models.CurrentModelID)
	}
	for _, id := range []string{o.Session, stale.Session, legacy.Session} {
		seedCloseProof(t, s, id, nil)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestRunning_ClosePreservesStateUnlessDiscarded:
// SEED-BEHAVIOR 25 (T: state-preserving close): a plain close keeps the
// record (closed, same ACP session id), so reopening the key resumes that
// session (session/load with its id, resumed true, same backend id) with
// its state: the used request id stays used and usage is carried over;
// close with discardPersistentState deletes the record and the next open
// is a new session.
func TestRunning_ClosePreservesStateUnlessDiscarded(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	agentState := t.TempDir()
	params := func(rec string) map[string]any {
		p := e.openParams("preserved", "")
		p["command"] = map[string]any{"path": faultBin, "args": []string{"--mode", "record=" + rec, "--state-dir", agentState}}
		return p
	}
	first := seedMustOpen(s, params(seedRecordFile(t)))
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": first.Session, "requestId": "t1", "prompt": "hi"}, &res)
	seedCloseProof(t, s, first.Session, nil)
	r := seedReadJSON(t, e.recordPath("preserved"))
	if r["closed"] != true || r["acp_session_id"] != first.Identity.BackendSessionID {
		t.Errorf("record after close: closed %v acp_session_id %v", r["closed"], r["acp_session_id"])
	}

	rec := seedRecordFile(t)
	second := seedMustOpen(s, params(rec))
	if !second.Resumed || second.Identity.BackendSessionID != first.Identity.BackendSessionID {
		t.Errorf("reopen resumed %v backend %q, want true and %q", second.Resumed, second.Identity.BackendSessionID, first.Identity.BackendSessionID)
	}
	if loads := seedRecv(seedReadAgent(t, rec), "session/load"); len(loads) != 1 || seedSessionIDOf(loads[0].Msg.Params) != first.Identity.BackendSessionID {
		t.Errorf("session/load requests %v, want one for the preserved session", loads)
	}
	seedWantError(t, "reusing t1 after resume", s.call("session/prompt", map[string]any{"session": second.Session, "requestId": "t1", "prompt": "again"}),
		-32000, "DUPLICATE_REQUEST_ID")
	var st struct {
		Usage struct {
			Cumulative struct {
				TotalTokens int64 `json:"totalTokens"`
			} `json:"cumulative"`
		} `json:"usage"`
	}
	s.mustCall("session/status", map[string]any{"session": second.Session}, &st)
	if st.Usage.Cumulative.TotalTokens != 15 {
		t.Errorf("usage after resume %d, want the preserved 15", st.Usage.Cumulative.TotalTokens)
	}
	seedCloseProof(t, s, second.Session, map[string]any{"discardPersistentState": true})
	if _, err := os.Stat(e.recordPath("preserved")); !os.IsNotExist(err) {
		t.Errorf("record still present after a discarding close (stat err %v)", err)
	}
	third := seedMustOpen(s, params(seedRecordFile(t)))
	if third.Resumed || third.Identity.BackendSessionID == first.Identity.BackendSessionID {
		t.Errorf("open after discard resumed %v backend %q, want a new session", third.Resumed, third.Identity.BackendSessionID)
	}
	seedCloseProof(t, s, third.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestRunning_CloseAfterProviderDeathReportsItsExit:
// SEED-BEHAVIOR 26 (T: rejects close with asynchronous provider signal
// errors; retains a provider error after close removes the child): the
// provider failed on its own (exit 3 mid-turn) before the host closed; the
// host's close, after the child is long removed, still reports that
// failure: its proof (origin provider-exit, complete) lists the provider
// with exitCode 3. Asynchronous signal-delivery errors cannot be provoked
// as root (see the skipped subtest).
func TestRunning_CloseAfterProviderDeathReportsItsExit(t *testing.T) {
	t.Run("provider-failure-kept", func(t *testing.T) {
		e := newFaultEnv(t)
		s := startSidecar(t, seedArgs(e)...)
		s.initialize(false)
		o := seedMustOpen(s, e.openParams("died", "crash-mid-turn"))
		var res turnResult
		s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "crash"}, &res)
		s.waitNote("session/exited", 20*time.Second, func(p json.RawMessage) bool {
			var n struct {
				Session string `json:"session"`
			}
			return json.Unmarshal(p, &n) == nil && n.Session == o.Session
		})
		waitNoMarked(t, e.mark, e.work, 10*time.Second)
		pr := seedCloseProof(t, s, o.Session, nil)
		found := false
		for _, p := range pr.Processes {
			if p.Pid == o.Process.Pid && p.Role == "provider" {
				found = true
				if p.ExitCode == nil || *p.ExitCode != 3 {
					t.Errorf("proof reports the provider's exit as code %v signal %q, want exitCode 3", p.ExitCode, p.Signal)
				}
			}
		}
		if !found || !pr.Complete || pr.Origin != "provider-exit" {
			t.Errorf("close proof %+v: want complete, origin provider-exit, listing provider %d", pr, o.Process.Pid)
		}
	})
	t.Run("signal-delivery-errors", func(t *testing.T) {
		t.Skip("a signal-delivery error needs a tree member the root sidecar cannot signal; pidfd_send_signal and " +
			"cgroup.kill on its own live tree do not fail for root. Aggregation order of such errors is asserted " +
			"in TestAdmission_FailedHandshakeErrorsAggregatedInOrder; provoking one needs an unprivileged sidecar " +
			"with a setuid descendant")
	})
}

// TestRunning_LateHostAnswerNeverApprovesNextTurn:
// SEED-BEHAVIOR 27 (A: permissionBoundary, "A session-lifetime callback
// must never acquire the next turn's approval authority"): turn t1's
// escalated permission is left unanswered and t1 is cancelled (the agent is
// answered "cancelled"); during t2 the host sends a late "allow-once" for
// t1's request and then "reject-once" for t2's: the agent sees exactly the
// rejection, and no permission is ever audited "approved".
func TestRunning_LateHostAnswerNeverApprovesNextTurn(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	asks := make(chan *frame, 4)
	s.onRequest = func(f *frame) any { asks <- f; return nil }
	s.initialize(true)
	o := seedMustOpen(s, e.openParams("authority", "permission=execute"))
	nextAsk := func(rid string) *frame {
		select {
		case f := <-asks:
			var p struct {
				RequestID string `json:"requestId"`
			}
			_ = json.Unmarshal(f.Params, &p)
			if f.Method != "session/requestPermission" || p.RequestID != rid {
				t.Fatalf("host request %s %s, want session/requestPermission for %s", f.Method, f.Params, rid)
			}
			return f
		case <-time.After(20 * time.Second):
			t.Fatalf("no permission request for %s", rid)
		}
		return nil
	}
	t1 := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "one"})
	ask1 := nextAsk("t1")
	s.mustCall("session/cancel", map[string]any{"session": o.Session, "requestId": "t1"}, nil)
	if r := decodeResult[turnResult](t, "t1", s.await(t1, 20*time.Second)); r.Status != "cancelled" {
		t.Errorf("t1 %+v, want cancelled", r)
	}
	t2 := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "two"})
	ask2 := nextAsk("t2")
	s.send(map[string]any{"jsonrpc": "2.0", "id": ask1.ID, "result": map[string]any{"outcome": "selected", "optionId": "allow-once"}})
	s.send(map[string]any{"jsonrpc": "2.0", "id": ask2.ID, "result": map[string]any{"outcome": "selected", "optionId": "reject-once"}})
	if r := decodeResult[turnResult](t, "t2", s.await(t2, 20*time.Second)); r.Status != "completed" {
		t.Errorf("t2 %+v, want completed", r)
	}
	texts := map[string][]string{}
	for _, u := range updatesOf(s, o.Session) {
		var c struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(u.Update, &c)
		if u.RequestID != nil && strings.HasPrefix(c.Content.Text, "permission:") {
			texts[*u.RequestID] = append(texts[*u.RequestID], c.Content.Text)
		}
	}
	if got := fmt.Sprint(texts["t1"]); got != "[permission: cancelled]" {
		t.Errorf("agent's t1 permission outcome %s, want [permission: cancelled]", got)
	}
	if got := fmt.Sprint(texts["t2"]); got != "[permission: selected reject-once]" {
		t.Errorf("agent's t2 permission outcome %s, want [permission: selected reject-once] (a late t1 answer must not decide t2)", got)
	}
	for _, n := range s.notesOf("session/permission") {
		if strings.Contains(string(n.Params), `"decision":"approved"`) {
			t.Errorf("a permission was approved: %s", n.Params)
		}
	}
	seedCloseProof(t, s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestRunning_ProviderDeathFailsTurnAndLaterPrompts:
// SEED-BEHAVIOR 28 (A: AcpxProviderProcessLostError): a provider that dies
// during a turn fails it (status failed, PROVIDER_PROCESS_LOST); a prompt
// sent right after fails the same way (as a failed turn or a request
// error, depending on whether the exit was already processed); once
// session/exited is out, prompts and model changes are refused -32000
// PROVIDER_PROCESS_LOST and status says "dead".
func TestRunning_ProviderDeathFailsTurnAndLaterPrompts(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := seedMustOpen(s, e.openParams("lost", "crash-mid-turn"))
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "crash"}, &res)
	if res.Status != "failed" || res.Error == nil || res.Error.Code != "PROVIDER_PROCESS_LOST" {
		t.Errorf("t1 %+v, want failed PROVIDER_PROCESS_LOST", res)
	}
	f := s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "again"})
	if f.Error != nil {
		seedWantError(t, "prompt right after the loss", f, -32000, "PROVIDER_PROCESS_LOST")
	} else if r := decodeResult[turnResult](t, "t2", f); r.Status != "failed" || r.Error == nil || r.Error.Code != "PROVIDER_PROCESS_LOST" {
		t.Errorf("t2 %+v, want failed PROVIDER_PROCESS_LOST", r)
	}
	s.waitNote("session/exited", 20*time.Second, func(p json.RawMessage) bool {
		var n struct {
			Session string `json:"session"`
		}
		return json.Unmarshal(p, &n) == nil && n.Session == o.Session
	})
	seedWantError(t, "prompt after session/exited", s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t3", "prompt": "again"}),
		-32000, "PROVIDER_PROCESS_LOST")
	seedWantError(t, "setModel after session/exited", s.call("session/setModel", map[string]any{"session": o.Session, "model": "fa-large"}),
		-32000, "PROVIDER_PROCESS_LOST")
	var st struct {
		State string `json:"state"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.State != "dead" {
		t.Errorf("status state %q, want dead", st.State)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestRunning_TurnAndSessionCostReportedSeparately:
// SEED-BEHAVIOR 30 (PR text: "explicit cost basis"): the agent reports cost
// as ACP defines UsageUpdate.cost — the cumulative session cost (0.25 after
// turn 1, 0.5 after turn 2). Each turn's result carries that turn's cost
// (0.25, basis "turn") and status the session's (0.5, basis
// "session-cumulative").
func TestRunning_TurnAndSessionCostReportedSeparately(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := seedMustOpen(s, e.openParams("cost", "cost=0.25"))
	type cost struct {
		Amount   float64 `json:"amount"`
		Currency string  `json:"currency"`
		Basis    string  `json:"basis"`
	}
	for _, rid := range []string{"t1", "t2"} {
		var r struct {
			Status string `json:"status"`
			Cost   *cost  `json:"cost"`
		}
		s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": rid, "prompt": "spend"}, &r)
		if r.Cost == nil || r.Cost.Amount != 0.25 || r.Cost.Currency != "USD" || r.Cost.Basis != "turn" {
			t.Errorf("%s cost %+v, want {0.25 USD turn}", rid, r.Cost)
		}
	}
	var st struct {
		Cost *cost `json:"cost"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.Cost == nil || st.Cost.Amount != 0.5 || st.Cost.Currency != "USD" || st.Cost.Basis != "session-cumulative" {
		t.Errorf("status cost %+v, want {0.5 USD session-cumulative}", st.Cost)
	}
	seedCloseProof(t, s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
