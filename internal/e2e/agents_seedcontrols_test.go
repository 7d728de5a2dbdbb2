package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The seed's admissions on the real agents (docs/agents.md; docs/protocol.md
// §24): Copilot's guard, Pi's and Kimi's thinking, and the four new agents
// per-turn; Pi moving between two HOME roots through a file:// store.

// TestAgent_CopilotGuard: @github/copilot 1.0.102 under deny-all — a prompt
// that starts with "/" is refused unless the open allows slash commands;
// autopilot is never selected (open, setMode, setConfigOption); allow_all
// cannot be switched on by the host; effort is refused (no
// reasoning_effort option with a BYOK provider) with nothing left; and
// when the agent itself switches allow_all on (/permissions allow-all: a
// config_option_update), the turn ends POLICY_BREACH, the breach is
// audited and set back, and the next tool call is asked about and denied.
func TestAgent_CopilotGuard(t *testing.T) {
	t.Parallel()
	a := newAgentRun(t, "copilot")
	g := a.open("guard", map[string]any{"permissionMode": "deny-all"})
	before := a.stub.Stats().Requests
	for _, text := range []string{"/allow-all on", "  /autopilot on"} {
		f := a.s.call("session/prompt", map[string]any{"session": g.Session, "requestId": "slash", "prompt": text})
		if d := wantError(t, "slash prompt "+text, f, -32602, "INVALID_PARAMS"); d.Field != "prompt" {
			t.Errorf("slash refusal names field %q, want prompt", d.Field)
		}
	}
	if a.stub.Stats().Requests != before {
		t.Errorf("a refused slash prompt reached the model")
	}
	a.prompt(g.Session, "slash", "say hello") // the refused requestId was never used
	autopilot := "https://agentclientprotocol.com/protocol/session-modes#autopilot"
	wantError(t, "setMode autopilot", a.s.call("session/setMode", map[string]any{"session": g.Session, "mode": autopilot}), -32000, "MODE_UNAVAILABLE")
	wantError(t, "setConfigOption mode autopilot", a.s.call("session/setConfigOption",
		map[string]any{"session": g.Session, "key": "mode", "value": autopilot}), -32000, "MODE_UNAVAILABLE")
	wantError(t, "setConfigOption allow_all on", a.s.call("session/setConfigOption",
		map[string]any{"session": g.Session, "key": "allow_all", "value": "on"}), -32000, "PERMISSION_POLICY_UNENFORCEABLE")
	a.close(g.Session)

	p := a.openParams("autopilot", map[string]any{"permissionMode": "approve-all", "mode": autopilot})
	if d := wantError(t, "open in autopilot", a.s.call("session/open", p), -32000, "MODE_UNAVAILABLE"); d.Cleanup != nil && len(d.Cleanup.Processes) > 0 {
		t.Errorf("the autopilot open launched something: %+v", d.Cleanup)
	}
	p = a.openParams("effort", map[string]any{"permissionMode": "approve-all", "effort": "high"})
	d := wantError(t, "copilot effort", a.s.call("session/open", p), -32000, "CONTROL_UNAVAILABLE")
	if d.Cleanup == nil || !d.Cleanup.Complete {
		t.Errorf("effort refused after launch without a complete proof: %+v", d.Cleanup)
	}
	waitNoMarked(t, p["env"].(map[string]string)["ACPX_TEST_MARK"], "", 10*time.Second)

	b := a.open("breach", map[string]any{"permissionMode": "deny-all", "allowSlashCommands": true})
	for i, c := range []struct{ prompt, control string }{{"/permissions allow-all", "allow_all"}} {
		rid := "b" + itoa(i)
		f := a.s.await(a.s.start("session/prompt", map[string]any{"session": b.Session, "requestId": rid, "prompt": c.prompt}), 60*time.Second)
		r := decodeResult[turnResult](t, "turn "+rid, f)
		// Copilot sends the config_option_update around its answer: when
		// it comes first the turn ends POLICY_BREACH, else the breach is
		// one between turns (requestId null). Either way it is audited
		// and set back before the next prompt.
		inTurn := r.Status == "failed" && r.Error != nil && r.Error.Code == "POLICY_BREACH"
		if !inTurn && r.Status != "completed" {
			t.Fatalf("%s: turn %s, want failed POLICY_BREACH or completed", c.prompt, f.Result)
		}
		defer func() {
			if t.Failed() {
				for _, n := range a.s.notesOf("session/policyBreach") {
					t.Logf("session/policyBreach %s", n.Params)
				}
			}
		}()
		a.s.waitNote("session/policyBreach", 30*time.Second, func(raw json.RawMessage) bool {
			var n struct {
				Session   string  `json:"session"`
				RequestID *string `json:"requestId"`
				Control   string  `json:"control"`
				Restored  bool    `json:"restored"`
			}
			return json.Unmarshal(raw, &n) == nil && n.Session == b.Session && (n.RequestID != nil && *n.RequestID == rid) == inTurn &&
				n.Control == c.control && n.Restored
		})
	}
	var st struct {
		ConfigOptions []json.RawMessage `json:"configOptions"`
	}
	a.s.mustCall("session/status", map[string]any{"session": b.Session}, &st)
	if v := optionValue(st.ConfigOptions, "allow_all"); v != "off" {
		t.Errorf("allow_all after the breaches %q, want off", v)
	}
	if v := optionValue(st.ConfigOptions, "mode"); !strings.HasSuffix(v, "#agent") {
		t.Errorf("mode after the breach %q, want #agent", v)
	}
	a.prompt(b.Session, "after", "make a file\nrun: touch after-breach.txt")
	a.wantNoFile("after-breach.txt")
	a.wantDecision(b.Session, "denied")
	a.close(b.Session)
	if _, status := a.s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	for _, m := range a.marks {
		waitNoMarked(t, m, "", 5*time.Second)
	}
	grepSecret(t, a.secret, a.stateDir, a.s.allOutput())
}

// TestAgent_PiThinking: pi's thinking level (its thought_level option) is
// set before the first prompt and verified, and the model request carries
// it; a level pi does not offer (max) is refused CONTROL_UNAVAILABLE after
// the handshake with nothing left running.
func TestAgent_PiThinking(t *testing.T) {
	t.Parallel()
	a := newAgentRun(t, "pi")
	o := a.open("think", map[string]any{"permissionMode": "approve-all", "thinking": "low"})
	if v := optionValue(o.ConfigOptions, "thought_level"); v != "low" {
		t.Fatalf("thought_level after the open %q, want low", v)
	}
	if st := a.prompt(o.Session, "t1", "say hello"); st != "completed" {
		t.Fatalf("turn: %s", st)
	}
	if n := a.stub.TurnsContaining(`"reasoning_effort":"low"`); n == 0 {
		t.Errorf("no model request of pi carries reasoning_effort low")
	}
	a.close(o.Session)
	wantControlRefused(a, "nothink", map[string]any{"permissionMode": "approve-all", "thinking": "max"})
	_, _ = a.s.shutdownAndExit()
}

// TestAgent_KimiThinking: kimi's thinking (its thinking option, on by
// default) is switched off before the first prompt and verified; a value
// it does not offer is refused with nothing left running.
func TestAgent_KimiThinking(t *testing.T) {
	t.Parallel()
	a := newAgentRun(t, "kimi")
	o := a.open("think", map[string]any{"permissionMode": "approve-all", "thinking": "off"})
	if v := optionValue(o.ConfigOptions, "thinking"); v != "off" {
		t.Fatalf("thinking after the open %q, want off", v)
	}
	if st := a.prompt(o.Session, "t1", "say hello"); st != "completed" {
		t.Fatalf("turn: %s", st)
	}
	a.close(o.Session)
	wantControlRefused(a, "nothink", map[string]any{"permissionMode": "approve-all", "thinking": "high"})
	_, _ = a.s.shutdownAndExit()
}

// wantControlRefused opens key with extra and wants CONTROL_UNAVAILABLE
// with a complete cleanup proof and no process of the open left.
func wantControlRefused(a *agentRun, key string, extra map[string]any) {
	a.t.Helper()
	p := a.openParams(key, extra)
	d := wantError(a.t, a.name+" "+key, a.s.call("session/open", p), -32000, "CONTROL_UNAVAILABLE")
	if d.Cleanup == nil || !d.Cleanup.Complete {
		a.t.Errorf("refusal without a complete cleanup proof: %+v", d.Cleanup)
	}
	waitNoMarked(a.t, p["env"].(map[string]string)["ACPX_TEST_MARK"], "", 10*time.Second)
}

// TestPerTurnAgent_Copilot is @github/copilot 1.0.102 (session/load).
func TestPerTurnAgent_Copilot(t *testing.T) { runPerTurnAgent(t, "copilot") }

// TestPerTurnAgent_Pi is pi-acp 0.0.34 (session/load).
func TestPerTurnAgent_Pi(t *testing.T) { runPerTurnAgent(t, "pi") }

// TestPerTurnAgent_Kimi is @moonshot-ai/kimi-code 2.1.0 (session/resume).
func TestPerTurnAgent_Kimi(t *testing.T) { runPerTurnAgent(t, "kimi") }

// TestPerTurnAgent_Qwen is @qwen-code/qwen-code 0.24.4 (session/resume).
func TestPerTurnAgent_Qwen(t *testing.T) { runPerTurnAgent(t, "qwen") }

// TestStoreAgent_PiMovesOverFile: a pi session moves between two sidecars
// with two HOME roots through a file:// store; pi-acp's session map names
// the session file by its old absolute path, which the restore rewrites,
// so the moved pi remembers (docs/agents.md, Pi).
func TestStoreAgent_PiMovesOverFile(t *testing.T) {
	t.Parallel()
	runMoveAgent(t, "pi", "file://"+t.TempDir(), nil)
}
