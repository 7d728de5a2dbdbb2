package store

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// acpxRuntime returns the path of the pinned npm acpx@0.19.1 runtime module
// (package.json at the repo root) and node, or skips.
func acpxRuntime(t *testing.T) (node, module string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	_, file, _, _ := runtime.Caller(0)
	module = filepath.Join(filepath.Dir(file), "..", "..", "node_modules", "acpx", "dist", "runtime.js")
	if _, err := os.Stat(module); err != nil {
		t.Skipf("npm acpx not installed (npm ci at the repo root): %v", err)
	}
	return node, module
}

// interopScript loads record argv[2] from stateDir argv[1] with acpx's own
// FileSessionStore, prints it (camelCase in-memory shape, or null), and
// saves it back through acpx's serializer.
const interopScript = `
const [stateDir, key, mod] = process.argv.slice(1);
const { createFileSessionStore } = await import(mod);
const store = createFileSessionStore({ stateDir });
const rec = await store.load(key);
process.stdout.write(JSON.stringify(rec ?? null));
if (rec) await store.save(rec);
`

func runAcpx(t *testing.T, stateDir, key string) map[string]any {
	t.Helper()
	node, module := acpxRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--input-type=module", "-e", interopScript, stateDir, key, module)
	cmd.Env = markedEnv()
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node acpx: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("node output %q: %v", out, err)
	}
	if m == nil {
		t.Fatalf("acpx@0.19.1 FileSessionStore.load(%q) rejected our record", key)
	}
	return m
}

// TestInterop_AcpxReadsOurRecordAndWeReadItsRewrite measures compatibility
// with the npm acpx@0.19.1 file store (docs/architecture.md, Durability):
// acpx loads a record we saved under a key needing encoding, saves it back
// with its own serializer, and we load that.
func TestInterop_AcpxReadsOurRecordAndWeReadItsRewrite(t *testing.T) {
	acpxRuntime(t)
	s := openTemp(t)
	const key = " run/42 ü! "
	r := newRecord(key)
	r.AgentSessionID = "agent-1"
	r.Pid = ptr(4242)
	r.LastRequestID = ptr("req-1")
	r.ProtocolVersion = 1
	r.AgentCapabilities = json.RawMessage(`{"loadSession":true}`)
	r.Messages = json.RawMessage(`[{"User":{"id":"req-1","content":[{"Text":"go"}]}},{"Agent":{"content":[{"Text":"ok"}],"tool_results":{}}}]`)
	r.CumulativeTokenUsage = &TokenUsage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CachedReadTokens: ptr(int64(3))}
	r.RequestTokenUsage = map[string]TokenUsage{"req-1": {InputTokens: 10, OutputTokens: 5, TotalTokens: 15}}
	r.CumulativeCost = &Cost{Amount: 0.25, Currency: "USD"}
	r.Acpx = AcpxState{CurrentModelID: "m1", AvailableModels: []string{"m1", "m2"}, ModelControl: "config_option",
		CurrentModeID: "auto", AgentProfile: "codex", CumulativeCost: &Cost{Amount: 0.25, Currency: "USD"},
		ContextUsage: &ContextUsage{Used: 15, Size: 1000}}
	if err := s.Save(r); err != nil {
		t.Fatal(err)
	}

	got := runAcpx(t, s.Dir(), key)
	checks := map[string]any{
		"acpxRecordId": key, "acpSessionId": "sess-" + key, "agentSessionId": "agent-1", "pid": float64(4242),
		"lastRequestId": "req-1", "cwd": "/srv/work", "protocolVersion": float64(1), "updated_at": r.UpdatedAt,
	}
	for k, want := range checks {
		if got[k] != want {
			t.Errorf("acpx sees %s = %#v, want %#v", k, got[k], want)
		}
	}
	if u, _ := got["cumulative_token_usage"].(map[string]any); u["cache_read_input_tokens"] != float64(3) {
		t.Errorf("acpx sees cumulative_token_usage %v", got["cumulative_token_usage"])
	}
	if c, _ := got["cumulative_cost"].(map[string]any); c["amount"] != 0.25 {
		t.Errorf("acpx sees cumulative_cost %v", got["cumulative_cost"])
	}
	if a, _ := got["acpx"].(map[string]any); a["current_model_id"] != "m1" || a["current_mode_id"] != "auto" {
		t.Errorf("acpx sees acpx state %v", got["acpx"])
	}

	back, err := s.Load(key)
	if err != nil {
		t.Fatalf("Load of acpx's rewrite: %v", err)
	}
	if back.AgentSessionID != "agent-1" || back.CumulativeCost == nil || back.CumulativeCost.Amount != 0.25 ||
		back.CumulativeTokenUsage == nil || back.CumulativeTokenUsage.CachedReadTokens == nil ||
		back.Acpx.CurrentModelID != "m1" || back.Acpx.CurrentModeID != "auto" || back.LastSeq != 0 {
		t.Errorf("record after acpx rewrite lost fields: %+v / acpx %+v", back, back.Acpx)
	}
	// Known limitation, documented on AcpxState: acpx drops acpx keys it does
	// not know when it rewrites a record.
	t.Logf("after acpx rewrite: acpx.agent_profile=%q acpx.cumulative_cost=%v event_log=%s",
		back.Acpx.AgentProfile, back.Acpx.CumulativeCost, back.EventLog)
	if fi, err := os.Stat(s.RecordPath(key)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("acpx rewrite mode: %v %v", fi, err)
	}
	// And our Save of acpx's rewrite is again readable by acpx.
	if err := s.Save(back); err != nil {
		t.Fatal(err)
	}
	runAcpx(t, s.Dir(), key)
}

// TestInterop_AcpxReadsFixtureAfterOurSave: the fixture, after our
// Load/Save, is still accepted by acpx.
func TestInterop_AcpxReadsFixtureAfterOurSave(t *testing.T) {
	acpxRuntime(t)
	s := openTemp(t)
	installFixture(t, s)
	r, err := s.Load("peer-0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(r); err != nil {
		t.Fatal(err)
	}
	if got := runAcpx(t, s.Dir(), "peer-0"); got["acpSessionId"] != "fa-2b4a3b1fde46" {
		t.Errorf("acpx sees %v", got["acpSessionId"])
	}
}
