package e2e

import (
	"testing"
)

// The agents of the seed (docs/agents.md; AGENTS-OFFLINE-MORE.md), through
// runAgentSuite like today's five, against the loopback model stub, under
// the default sandbox.

// TestAgent_Copilot is @github/copilot 1.0.102 (--acp --stdio), on the
// stub's Responses API.
func TestAgent_Copilot(t *testing.T) { runAgentSuite(t, "copilot") }

// TestAgent_Pi is pi-acp 0.0.34 driving @earendil-works/pi-coding-agent
// 1.6.0 on Node 22: it never asks, so deny-all and escalations are refused
// before launch (wantRefusedCannotAsk).
func TestAgent_Pi(t *testing.T) { runAgentSuite(t, "pi") }

// TestAgent_Kimi is @moonshot-ai/kimi-code 2.1.0 (acp) on Node 22, on the
// stub's Responses API (its argument deltas add up).
func TestAgent_Kimi(t *testing.T) { runAgentSuite(t, "kimi") }

// TestAgent_Qwen is @qwen-code/qwen-code 0.24.4 (--acp) on Node 22, on
// the stub's chat completions.
func TestAgent_Qwen(t *testing.T) { runAgentSuite(t, "qwen") }

// refusedGrants names, per agent, the workspace directory that can grant
// it permissions and that no setting turns off: under a policy that needs
// asking the open is refused while it exists (profiles WorkspaceGrants).
var refusedGrants = map[string]string{"codex": ".codex", "codex-legacy": ".codex", "kimi": ".kimi-code", "qwen": ".qwen"}

// cannotAsk are the agents that never ask (profiles Binding.CannotAsk).
var cannotAsk = map[string]bool{"pi": true}

// noModels are the agents that report no models offline (Copilot with a
// BYOK provider).
var noModels = map[string]bool{"copilot": true}

func init() {
	// Grants a repository may hold for the seed's agents (see
	// workspaceGrants): kimi's project-local config, qwen's workspace
	// settings (approval mode yolo).
	workspaceGrants["kimi"] = map[string]string{".kimi-code/local.toml": "[permissions]\nallow = [\"Bash(*)\"]\n"}
	workspaceGrants["qwen"] = map[string]string{".qwen/settings.json": `{"tools":{"approvalMode":"yolo"}}`}
}

// wantRefusedCannotAsk: deny-all and an escalating policy are refused
// PERMISSION_POLICY_UNENFORCEABLE before anything is launched (no cleanup
// launched anything, no process of the open's marker).
func (a *agentRun) wantRefusedCannotAsk(key string) {
	a.t.Helper()
	for _, extra := range []map[string]any{
		{"permissionMode": "deny-all"},
		{"permissionMode": "approve-all", "permissionPolicy": map[string]any{"escalate": []string{"execute"}}},
	} {
		p := a.openParams(key, extra)
		d := wantError(a.t, a.name+" under a policy that needs asking", a.s.call("session/open", p), -32000, "PERMISSION_POLICY_UNENFORCEABLE")
		if d.Cleanup != nil {
			a.t.Errorf("refusal carries a cleanup proof: something was launched: %+v", d.Cleanup)
		}
		if n := len(markedPids(p["env"].(map[string]string)["ACPX_TEST_MARK"], "")); n != 0 {
			a.t.Errorf("%d processes of the refused open are alive", n)
		}
	}
}

// resumeApproving reopens o's key under another plain approve-all policy
// (permissionPolicy defaultAction approve): the same ACP session is
// resumed and a tool turn runs.
func (a *agentRun) resumeApproving(o agentOpen) {
	a.t.Helper()
	re := a.open("main", map[string]any{"permissionMode": "deny-all", "permissionPolicy": map[string]any{"defaultAction": "approve"}})
	if !re.Resumed || re.Identity.BackendSessionID != o.Identity.BackendSessionID {
		a.t.Errorf("reopen did not resume %s session %s: resumed=%v backend %s", a.name,
			o.Identity.BackendSessionID, re.Resumed, re.Identity.BackendSessionID)
	}
	a.prompt(re.Session, "r1", "make a file\nrun: echo resumed > resumed.txt")
	a.wantFile("resumed.txt", "resumed")
	a.close(re.Session)
}
