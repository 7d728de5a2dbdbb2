package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/agentenv"
)

// Per-turn sessions of the real agents (docs/protocol.md §24): for each
// pinned agent that can resume or load its session in a new process, two
// turns with the tree gone between them, and the second turn's model
// request carrying what the first turn said — the revived agent
// remembered the conversation.

// TestPerTurnAgent_Codex is @agentclientprotocol/codex-acp 2.6.0.
func TestPerTurnAgent_Codex(t *testing.T) { runPerTurnAgent(t, "codex") }

// TestPerTurnAgent_Claude is @agentclientprotocol/claude-agent-acp 0.101.0.
func TestPerTurnAgent_Claude(t *testing.T) { runPerTurnAgent(t, "claude") }

// TestPerTurnAgent_OpenCode is opencode-ai 1.18.33.
func TestPerTurnAgent_OpenCode(t *testing.T) { runPerTurnAgent(t, "opencode") }

// TestPerTurnAgent_CodexLegacy is @zed-industries/codex-acp 0.16.0.
func TestPerTurnAgent_CodexLegacy(t *testing.T) { runPerTurnAgent(t, "codex-legacy") }

// TestPerTurnAgent_GeminiRefused: @google/gemini-cli 0.61.0 advertises
// session/load but cannot load a session in the minute its first turn
// recorded it (docs/agents.md), so a lifecycle that retires its tree is
// refused CAPABILITY_UNSUPPORTED before anything is launched.
func TestPerTurnAgent_GeminiRefused(t *testing.T) {
	t.Parallel()
	a := newAgentRun(t, "gemini")
	for _, lc := range []any{"per-turn", map[string]any{"mode": "warm", "idleRetireMs": 60000}} {
		p := a.openParams("pt", map[string]any{"permissionMode": "approve-all", "lifecycle": lc})
		d := wantError(t, "gemini per-turn", a.s.call("session/open", p), -32000, "CAPABILITY_UNSUPPORTED")
		if d.Capability != "loadSession" || d.Cleanup != nil {
			t.Errorf("refusal data %+v: want capability loadSession, nothing launched", d)
		}
	}
	if n := len(markedPids(a.marks[0], "")); n != 0 {
		t.Errorf("%d processes of the refused open are alive", n)
	}
	_, _ = a.s.shutdownAndExit()
}

// runPerTurnAgent opens a per-turn session of agent name, runs a turn that
// names a word only this test knows, checks the tree is gone and the
// session parked, runs a second turn and checks the model request of that
// turn carries the word (the agent's own session was resumed in a new
// process), then closes the parked session.
func runPerTurnAgent(t *testing.T, name string) {
	t.Parallel()
	a := newAgentRun(t, name)
	word := "kiwi-" + randHex(6)
	o := a.open("pt", map[string]any{"permissionMode": "approve-all", "lifecycle": "per-turn"})
	if st := a.prompt(o.Session, "t1", "Please remember the word "+word+"."); st != "completed" {
		t.Fatalf("turn 1: %s", st)
	}
	p1 := waitParked(t, a.s, o.Session, 1)
	if !p1.Complete || p1.Origin != "retire" {
		t.Fatalf("retire proof %+v", p1)
	}
	waitNoMarked(t, o.mark, "", 10*time.Second)
	if st := statusOf(a.s, o.Session); st.State != "parked" {
		t.Fatalf("state after the retire %q, want parked", st.State)
	}
	second := "Which word did I ask you to remember?"
	if st := a.prompt(o.Session, "t2", second); st != "completed" {
		t.Fatalf("turn 2: %s", st)
	}
	if n := a.stub.TurnsContaining(second, word); n == 0 {
		t.Fatalf("no model request of turn 2 carries the word of turn 1: the revived %s did not remember", name)
	}
	waitParked(t, a.s, o.Session, 2)
	var states []string
	for _, l := range lifecycleNotes(a.s, o.Session) {
		states = append(states, l.State)
	}
	if strings.Join(states, " ") != "parked reviving live parked" {
		t.Errorf("session/lifecycle states %v", states)
	}
	cp := closeProof(a.s, o.Session, nil)
	if !cp.Complete || len(cp.Processes) != 0 {
		t.Errorf("close of the parked session: %+v", cp)
	}
	if _, status := a.s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	waitNoMarked(t, o.mark, "", 5*time.Second)
	grepSecret(t, a.secret, a.stateDir, a.s.allOutput())
}

// TestStoreAgent_CodexMovesOverS3: a codex session moves between two
// sidecars through versitygw: A (its own state dir and HOME root) runs a
// turn and closes, A's state dir is deleted whole, B (another state dir,
// another HOME root, the same cwd) opens the key: the archive is restored
// into B's CODEX_HOME, the session resumed, and codex remembers.
func TestStoreAgent_CodexMovesOverS3(t *testing.T) {
	t.Parallel()
	srv := s3Server(t)
	runMoveAgent(t, "codex", srv.URL("agents"), s3Wrapper(srv))
}

// TestStoreAgent_ClaudeMovesOverFile: the same for claude over file://
// (its transcripts live under CLAUDE_CONFIG_DIR/projects/<cwd slug>/).
func TestStoreAgent_ClaudeMovesOverFile(t *testing.T) {
	t.Parallel()
	runMoveAgent(t, "claude", "file://"+t.TempDir(), nil)
}

func runMoveAgent(t *testing.T, name, storeURL string, wrapper []string) {
	key, _ := masterKeyFile(t)
	flags := []string{"--state-store", storeURL, "--state-key-file", key}
	a := newAgentRunVia(t, name, wrapper, flags...)
	word := "plum-" + randHex(6)
	oA := a.open("moving", map[string]any{"permissionMode": "approve-all"})
	if st := a.prompt(oA.Session, "t1", "Please remember the word "+word+"."); st != "completed" {
		t.Fatalf("turn on A: %s", st)
	}
	pub := proofPublication(t, closeRaw(t, a.s, oA.Session))
	if pub == nil || pub.State != "published" {
		t.Fatalf("A's close publication %+v", pub)
	}
	if _, status := a.s.shutdownAndExit(); status != 0 {
		t.Fatalf("A exit %d", status)
	}
	if err := os.RemoveAll(a.stateDir); err != nil {
		t.Fatal(err)
	}

	b := newAgentRunVia(t, name, wrapper, flags...)
	b.work = a.work // the agent's session names its cwd
	var oB storeOpen
	b.s.mustCall("session/open", b.openParams("moving", map[string]any{"permissionMode": "approve-all"}), &oB)
	if oB.Restore == nil || !oB.Resumed || oB.Identity.BackendSessionID != oA.Identity.BackendSessionID {
		t.Fatalf("open on B: restore %+v resumed %v backend %q, want A's %q restored and resumed",
			oB.Restore, oB.Resumed, oB.Identity.BackendSessionID, oA.Identity.BackendSessionID)
	}
	if name == "pi" {
		// pi-acp's session map names the session file by its absolute
		// path: the restore rewrote it into B's HOME (internal/provstate/rewrite.go).
		bHome := agentenv.KeyHome(b.stateDir, "moving")
		bm, err := os.ReadFile(filepath.Join(bHome, ".pi", "pi-acp", "session-map.json"))
		if err != nil || !strings.Contains(string(bm), `"sessionFile": "`+bHome+"/.pi/agent/sessions/") {
			t.Fatalf("pi-acp's session map after the restore (%v): %s; want its session file under %s", err, bm, bHome)
		}
	}
	second := "Which word did I ask you to remember?"
	if st := b.prompt(oB.Session, "t2", second); st != "completed" {
		t.Fatalf("turn on B: %s", st)
	}
	if b.stub.TurnsContaining(second, word) == 0 {
		t.Fatalf("B's %s did not send its model A's turn: it does not remember", name)
	}
	closeRaw(t, b.s, oB.Session)
	_, _ = b.s.shutdownAndExit()
	for _, m := range append(a.marks, b.marks...) {
		waitNoMarked(t, m, "", 5*time.Second)
	}
	grepSecret(t, a.secret, b.stateDir, b.s.allOutput())
}
