package e2e

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/agentenv"
	"github.com/acpx-sidecar/acpx-sidecar/internal/modelstub"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// The real agents of today (docs/agents.md), each driven through the built
// binary against the loopback model stub (docs/agents.md). One test per agent, so
// a failure names it; every step of one agent shares one sidecar.

// TestAgent_Codex is @agentclientprotocol/codex-acp 2.6.0.
func TestAgent_Codex(t *testing.T) { runAgentSuite(t, "codex") }

// TestAgent_Claude is @agentclientprotocol/claude-agent-acp 0.101.0.
func TestAgent_Claude(t *testing.T) { runAgentSuite(t, "claude") }

// TestAgent_Gemini is @google/gemini-cli 0.61.0 (--acp).
func TestAgent_Gemini(t *testing.T) { runAgentSuite(t, "gemini") }

// TestAgent_OpenCode is opencode-ai 1.18.33 (acp).
func TestAgent_OpenCode(t *testing.T) { runAgentSuite(t, "opencode") }

// TestAgent_CodexLegacy is @zed-industries/codex-acp 0.16.0.
func TestAgent_CodexLegacy(t *testing.T) { runAgentSuite(t, "codex-legacy") }

// runAgentSuite holds one agent to every promise of docs/agents.md, in order:
//   - a text turn streams the stub's text; the open reports the agent bound
//     to the policy (permissionBinding.bound); for the five pinned agents
//     the session reaches the model through sandbox.network.allow, a tool
//     finds other destinations closed, and a second session reaches its
//     model by a pinned name, audited (agents_egress_test.go);
//   - under approve-all a tool turn runs the command (the file exists);
//   - setModel to a listed model is verified;
//   - reopen resumes the same ACP session (for agents that offer load or
//     resume), and under deny-all the command never runs;
//   - an escalated execute reaches the host, whose answer is obeyed (one
//     approval: the file exists; one rejection: it does not);
//   - close while the tool runs gives a complete proof and no process left;
//   - SIGKILL of the agent's root mid-tool gives session/exited and a
//     provider-exit proof naming the tool it reaped;
//   - the API key appears in nothing the sidecar wrote.
func runAgentSuite(t *testing.T, name string) {
	t.Parallel()
	a := newAgentRun(t, name)

	// 1. Text, tool under approve-all, model control.
	// The five pinned agents reach the model through an allow list of its
	// loopback address alone (agents_egress_test.go).
	main := a.open("main", a.withEgress(map[string]any{"permissionMode": "approve-all"}))
	switch {
	case cannotAsk[name] && (main.Binding.Bound || main.Binding.Via != "none"):
		t.Errorf("%s cannot ask, yet the open reports it bound: %+v", name, main.Binding)
	case !cannotAsk[name] && !main.Binding.Bound:
		t.Errorf("open did not bind %s to the policy: permissionBinding %+v", name, main.Binding)
	}
	t.Logf("%s bound: %+v; modes %+v", name, main.Binding, main.Modes)
	text := a.turnText(main.Session, "t1", "say hello")
	firstTurnDone := time.Now() // gemini's chat file exists by now
	if !strings.Contains(text, modelstub.HelloText) {
		t.Errorf("streamed text %q does not hold the stub's %q", text, modelstub.HelloText)
	}
	a.wantListedModel(main.Session)
	a.prompt(main.Session, "t2", "make a file\nrun: echo approved > approved.txt")
	a.wantFile("approved.txt", "approved")
	// The default sandbox (workspace, docs/protocol.md §19) holds whatever
	// the agent's own mode: the same approved tool writing outside cwd
	// leaves nothing there.
	if sb := main.Sandbox; sb == nil || !sb.Enforced || sb.Filesystem != "workspace" {
		t.Errorf("%s runs without the default sandbox: %+v", name, sb)
	}
	outside := t.TempDir()
	a.prompt(main.Session, "t2o", "make a file\nrun: echo escaped > "+outside+"/escaped.txt")
	a.wantNoFileIn(outside, "escaped.txt")
	otherPort, _ := countingServer(t, stubHandler)
	a.egressTool(main, otherPort)
	a.setModel(main) // where the agent has models (agents_seed_test.go: noModels)
	a.agentSessions(main.Session, main.Identity.BackendSessionID)
	a.close(main.Session)
	a.egressByName()

	// 2. Reopen (resume) under deny-all: the command never runs.
	if name == "gemini" {
		// gemini-cli 0.61.0 names its chat file by the minute it starts
		// recording (by the first turn); a session/load in that same minute
		// starts a recording
		// under the same name first, which empties it, and the load then
		// fails "Invalid session identifier" (docs/agents.md). A host
		// reopening a minute later resumes; so does this test.
		waitNextMinute(firstTurnDone)
	}
	// The workspace holds files granting the shell without asking, as a
	// repository under the agent's hands may: they must not count.
	a.plantGrants()
	if dir := refusedGrants[a.name]; dir != "" {
		// Nothing turns this agent's workspace settings off (codex-acp 2.x
		// trusts every session root; kimi's .kimi-code/, qwen's .qwen/):
		// such a workspace cannot be held to deny-all.
		f := a.s.call("session/open", a.openParams("main", map[string]any{"permissionMode": "deny-all"}))
		wantError(t, "deny-all over a workspace with "+dir, f, -32000, "PERMISSION_POLICY_UNENFORCEABLE")
		if err := os.RemoveAll(filepath.Join(a.work, dir)); err != nil {
			t.Fatal(err)
		}
	}
	if cannotAsk[a.name] {
		// An agent that never asks cannot be held to a policy that denies
		// or escalates: refused before launch; it resumes under another
		// plain approve-all policy instead (agents_seed_test.go).
		a.wantRefusedCannotAsk("main")
		a.resumeApproving(main)
		a.removeGrants()
		a.killAndShutdown()
		return
	}
	denied := a.open("main", map[string]any{"permissionMode": "deny-all"})
	if main.resumable() {
		if !denied.Resumed || denied.Identity.BackendSessionID != main.Identity.BackendSessionID {
			t.Errorf("reopen did not resume %s session %s: resumed=%v backend %s", name,
				main.Identity.BackendSessionID, denied.Resumed, denied.Identity.BackendSessionID)
		}
	} else {
		t.Logf("%s offers neither session/load nor session/resume: no resume to check", name)
	}
	a.prompt(denied.Session, "d1", "make a file\nrun: touch denied.txt")
	a.wantNoFile("denied.txt")
	a.wantDecision(denied.Session, "denied")
	a.close(denied.Session)
	a.removeGrants()

	// 3. Escalated execute: the host's answer is obeyed; then close mid-tool.
	esc := a.open("escalate", map[string]any{"permissionMode": "approve-all",
		"permissionPolicy": map[string]any{"escalate": []string{"execute"}}})
	a.answerWith(esc.Session, "allow_once")
	a.prompt(esc.Session, "e1", "make a file\nrun: echo escalated > escalated.txt")
	a.wantFile("escalated.txt", "escalated")
	a.wantEscalated(esc.Session, "execute")
	a.answerWith(esc.Session, "reject_once")
	a.prompt(esc.Session, "e2", "make a file\nrun: echo rejected > rejected.txt")
	a.wantNoFile("rejected.txt")
	// A command that looks like a search is still an execute to the policy
	// (codex-acp 0.16 labels find "search"): escalated, rejected, not run.
	a.prompt(esc.Session, "e2b", "find things\nrun: find . -maxdepth 0 -exec touch found.txt ;")
	a.wantNoFile("found.txt")
	a.answerWith(esc.Session, "allow_once")
	turn := a.s.start("session/prompt", map[string]any{"session": esc.Session, "requestId": "e3", "prompt": "wait\nrun: " + sleepCmd})
	sleeper := a.waitTool(esc.mark)
	a.close(esc.Session)
	if alive(sleeper) {
		t.Errorf("the tool (pid %d) survived a complete close proof", sleeper)
	}
	a.s.await(turn, 60*time.Second)
	waitNoMarked(t, esc.mark, "", 5*time.Second)

	a.killAndShutdown()
}

// killAndShutdown is the suite's end: a SIGKILL of the agent's root
// mid-tool, the sidecar's shutdown, no process left, no secret written.
func (a *agentRun) killAndShutdown() {
	t, name := a.t, a.name
	t.Helper()
	// 4. SIGKILL of the agent's root mid-tool.
	kill := a.open("kill", map[string]any{"permissionMode": "approve-all"})
	turn := a.s.start("session/prompt", map[string]any{"session": kill.Session, "requestId": "k1", "prompt": "wait\nrun: " + sleepCmd})
	sleeper := a.waitTool(kill.mark)
	tree := settledTree(kill.Process.Pid, kill.mark)
	if err := unix.Kill(kill.Process.Pid, unix.SIGKILL); err != nil {
		t.Fatalf("kill the agent root %d: %v", kill.Process.Pid, err)
	}
	a.waitExited(kill.Session)
	pr := a.waitProof(kill.Session, "provider-exit")
	if !pr.Complete {
		t.Errorf("provider-exit proof not complete: %+v", pr)
	}
	// Every process of the tree is named, or was reaped by its own parent
	// inside the tree, which is named (an agent may end its own tools when
	// its root dies: codex does).
	for pid, ppid := range tree {
		if !pr.names(pid) && !pr.names(ppid) {
			t.Errorf("provider-exit proof names neither %d nor its parent %d: %+v", pid, ppid, pr.Processes)
		}
	}
	t.Logf("%s: tool %d named in the provider-exit proof: %v (%d processes listed)", name, sleeper, pr.names(sleeper), len(pr.Processes))
	if f := a.s.await(turn, 60*time.Second); f.Error == nil && !strings.Contains(string(f.Result), `"failed"`) {
		t.Errorf("turn of a killed agent: %s, want status failed", f.Result)
	}
	waitNoMarked(t, kill.mark, "", 5*time.Second)

	if _, status := a.s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d after shutdown", status)
	}
	for _, m := range a.marks {
		waitNoMarked(t, m, "", 5*time.Second)
	}
	grepSecret(t, a.secret, a.stateDir, a.s.allOutput())
}

// sleepCmd is the long-running tool command. `env` in front: Claude's Bash
// tool refuses a bare `sleep N` (docs/agents.md).
const sleepCmd = "env sleep 45"

func (p proof) names(pid int) bool {
	for _, pp := range p.Processes {
		if pp.Pid == pid {
			return true
		}
	}
	return false
}

// parents maps each live pid of pids to its parent pid.
func parents(pids []int) map[int]int {
	out := map[int]int{}
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		var state string
		var ppid int
		if i > 0 {
			if _, err := fmt.Sscan(string(b[i+1:]), &state, &ppid); err == nil {
				out[pid] = ppid
			}
		}
	}
	return out
}

// settledTree is the tree below root (pid -> ppid) of the processes
// carrying mark that are alive in two readings of the process table half
// a second apart: agents start short-lived helpers all the time (qwen
// polls its tools' process groups with pgrep through a shell), and one
// that exits on its own between the reading and the kill, reaped by a
// parent that exits too, is in no proof. The settled processes are the
// ones the kill finds.
func settledTree(root int, mark string) map[int]int {
	first := descendants(root, parents(markedPids(mark, "")))
	time.Sleep(500 * time.Millisecond) // the gap that filters transients, not a wait for an event
	second := descendants(root, parents(markedPids(mark, "")))
	for pid, ppid := range second {
		if first[pid] != ppid {
			delete(second, pid)
		}
	}
	return second
}

// descendants keeps the entries of tree (pid -> ppid) below root.
func descendants(root int, tree map[int]int) map[int]int {
	out := map[int]int{}
	for pid, ppid := range tree {
		for p, hops := ppid, 0; hops < len(tree)+1; p, hops = tree[p], hops+1 {
			if p == root {
				out[pid] = ppid
				break
			}
			if _, ok := tree[p]; !ok {
				break
			}
		}
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// agentRun is one agent's sidecar, stub, workspace and sessions.
type agentRun struct {
	t        *testing.T
	name     string
	s        *sidecar
	stub     *modelstub.Stub
	stubURL  string
	stateDir string
	work     string
	secret   string
	marks    []string

	answers map[string]string // session -> option kind the host picks
	// tapRecord, when set, is a record file: every session is launched
	// through the fault agent's __tap-exec, and when the test ends every
	// frame the sidecar sent the real agent is checked against the ACP v1
	// schema (acpTapped).
	tapRecord string
}

func newAgentRun(t *testing.T, name string) *agentRun { return newAgentRunVia(t, name, nil) }

// newAgentRunVia is newAgentRun with the sidecar started through wrapper
// (startSidecarVia) and with extra flags.
func newAgentRunVia(t *testing.T, name string, wrapper []string, extra ...string) *agentRun {
	if _, err := agentenv.Lookup(name); err != nil {
		t.Fatal(err)
	}
	a := &agentRun{t: t, name: name, stub: modelstub.New(t.Logf), stateDir: t.TempDir(), work: t.TempDir(),
		secret: "sk-agent-" + randHex(12), answers: map[string]string{}}
	srv := httptest.NewServer(a.stub)
	t.Cleanup(srv.Close)
	a.stubURL = srv.URL
	// Skipped without the npm install only outside CI (make deps installs).
	probe := filepath.Join(t.TempDir(), "probe")
	if _, err := agentenv.Prepare(name, repoRoot, a.stubURL, probe); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s cannot be prepared (make deps installs the agents): %v", name, err)
		}
		t.Skipf("%s not installed (run `make deps`): %v", name, err)
	}
	// A real agent's handshake is its own start-up (OpenCode's takes 9-25 s
	// on a loaded 2-core machine): bound it by 55 s, within call's 60 s,
	// rather than the default 30 s, which it has missed under load.
	flags := append([]string{"--state-dir", a.stateDir, "--handshake-timeout-ms", "55000"}, egressFlags...)
	a.s = startSidecarVia(t, wrapper, append(flags, extra...)...)
	a.s.onRequest = a.onPermission
	a.s.initialize(true)
	return a
}

// agentOpen is what the suite reads of a session/open result.
type agentOpen struct {
	openResult
	Binding struct {
		Bound      bool   `json:"bound"`
		Mode       string `json:"mode"`
		Via        string `json:"via"`
		Autonomous bool   `json:"autonomous"`
	} `json:"permissionBinding"`
	Models *struct {
		Current   string   `json:"currentModelId"`
		Available []string `json:"availableModelIds"`
	} `json:"models"`
	Modes *struct {
		Current   string   `json:"currentModeId"`
		Available []string `json:"availableModeIds"`
	} `json:"modes"`
	Sandbox       *sandboxResult    `json:"sandbox"`
	ConfigOptions []json.RawMessage `json:"configOptions"`
	AgentCaps     struct {
		Capabilities struct {
			LoadSession         bool `json:"loadSession"`
			SessionCapabilities struct {
				Resume json.RawMessage `json:"resume"`
			} `json:"sessionCapabilities"`
		} `json:"capabilities"`
	} `json:"agent"`
	mark string
}

// waitNextMinute returns once the wall clock is in a later minute than t
// (gemini's chat file names; bounded by a minute by construction).
func waitNextMinute(t time.Time) {
	next := t.Truncate(time.Minute).Add(time.Minute + 100*time.Millisecond)
	time.Sleep(time.Until(next))
}

func (o agentOpen) resumable() bool {
	c := o.AgentCaps.Capabilities
	return c.LoadSession || len(c.SessionCapabilities.Resume) > 0
}

// openParams are session/open params for key with a fresh marker and the
// extra params: no env.HOME, so the agent runs in the key's private HOME
// (docs/protocol.md §19), reused when key is reopened, where Prepare wrote
// its configuration.
func (a *agentRun) openParams(key string, extra map[string]any) map[string]any {
	a.t.Helper()
	l, err := agentenv.Prepare(a.name, repoRoot, a.stubURL, agentenv.KeyHome(a.stateDir, key))
	if err != nil {
		a.t.Fatal(err)
	}
	return a.openParamsFor(l, key, extra)
}

func (a *agentRun) openParamsFor(l *agentenv.Launch, key string, extra map[string]any) map[string]any {
	mark := testmark.New()
	killMarkedOnCleanup(a.t, mark)
	a.marks = append(a.marks, mark)
	env := map[string]string{l.KeyEnv: a.secret, "ACPX_TEST_MARK": mark}
	for k, v := range l.Env {
		env[k] = v
	}
	var command any = l.Command
	if a.tapRecord != "" {
		command = agentenv.Command{Path: faultBin, Args: append([]string{"__tap-exec", a.tapRecord, l.Command.Path}, l.Command.Args...)}
	}
	p := map[string]any{"sessionKey": key, "agent": l.Agent, "command": command, "cwd": a.work, "env": env}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// open opens key (see openParams) and fails the test on an error.
func (a *agentRun) open(key string, extra map[string]any) agentOpen {
	a.t.Helper()
	l, err := agentenv.Prepare(a.name, repoRoot, a.stubURL, agentenv.KeyHome(a.stateDir, key))
	if err != nil {
		a.t.Fatal(err)
	}
	p := a.openParamsFor(l, key, extra)
	mark := p["env"].(map[string]string)["ACPX_TEST_MARK"]
	var o agentOpen
	a.s.mustCall("session/open", p, &o)
	o.mark = mark
	return o
}

// prompt runs one turn and returns its result status.
func (a *agentRun) prompt(session, rid, text string) string {
	a.t.Helper()
	f := a.s.await(a.s.start("session/prompt", map[string]any{"session": session, "requestId": rid, "prompt": text}), 120*time.Second)
	if f.Error != nil {
		a.t.Fatalf("turn %s: %d %s %s", rid, f.Error.Code, f.Error.Message, f.Error.Data)
	}
	var res struct {
		Status     string `json:"status"`
		StopReason string `json:"stopReason"`
	}
	_ = json.Unmarshal(f.Result, &res)
	a.t.Logf("turn %s: %s", rid, f.Result)
	return res.Status
}

// turnText runs a turn that must complete with end_turn and returns the
// text of its agent_message_chunk updates, which must carry its requestId
// and gap-free seq.
func (a *agentRun) turnText(session, rid, text string) string {
	a.t.Helper()
	if st := a.prompt(session, rid, text); st != "completed" {
		a.t.Fatalf("turn %s status %q, want completed", rid, st)
	}
	var b strings.Builder
	for i, u := range updatesOf(a.s, session) {
		if u.Seq != uint64(i+1) {
			a.t.Fatalf("seq gap: update %d has seq %d", i, u.Seq)
		}
		var h struct {
			Kind    string `json:"sessionUpdate"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(u.Update, &h) == nil && h.Kind == "agent_message_chunk" && u.RequestID != nil && *u.RequestID == rid {
			b.WriteString(h.Content.Text)
		}
	}
	return b.String()
}

func (a *agentRun) wantFile(name, content string) {
	a.t.Helper()
	b, err := os.ReadFile(filepath.Join(a.work, name))
	if err != nil || strings.TrimSpace(string(b)) != content {
		a.t.Fatalf("the approved command did not run: %s: %v %q (stub commands %v)", name, err, b, a.stub.Stats().Commands)
	}
}

func (a *agentRun) wantNoFile(name string) {
	a.t.Helper()
	if _, err := os.Stat(filepath.Join(a.work, name)); err == nil {
		a.t.Fatalf("%s exists: the agent ran a command the policy refused", name)
	}
	found := false
	for _, c := range a.stub.Stats().Commands {
		found = found || strings.Contains(c, name)
	}
	if !found {
		a.t.Fatalf("the model never asked to write %s: the refusal proves nothing", name)
	}
}
