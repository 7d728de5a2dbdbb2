package e2e

import (
	"os"
	"testing"
	"time"
)

// Binding an agent to the host's permission policy (docs/agents.md), with
// the fault agent standing in for an agent whose profile expects modes it
// does not offer. The real agents' bindings are in agents_test.go.

// TestBinding_AutonomousHostModeRefusedBeforeLaunch: a host mode in which
// the agent decides alone (codex "agent") with a policy that needs asking
// is PERMISSION_POLICY_UNENFORCEABLE before anything is launched; the same
// mode under approve-all passes that check (and then fails only because
// the fault agent has no such mode).
func TestBinding_AutonomousHostModeRefusedBeforeLaunch(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	rec := seedRecordFile(t)
	p := seedOpenParams(e, "auto", rec, "")
	p["agent"], p["mode"], p["permissionMode"] = "codex", "agent", "deny-all"
	wantError(t, "autonomous mode under deny-all", s.call("session/open", p), -32000, "PERMISSION_POLICY_UNENFORCEABLE")
	if _, err := os.Stat(rec); err == nil {
		t.Errorf("the agent was launched although the open was refused before launch")
	}
	p["permissionMode"] = "approve-all"
	wantError(t, "autonomous mode under approve-all", s.call("session/open", p), -32000, "MODE_UNAVAILABLE")
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestBinding_AgentWithoutAskingModeRefusedUnlessApproveAll: an agent that
// offers none of its profile's asking modes cannot be held to deny-all: the
// open fails PERMISSION_POLICY_UNENFORCEABLE after the handshake, its tree
// reaped (complete proof); under approve-all it opens, reported unbound.
func TestBinding_AgentWithoutAskingModeRefusedUnlessApproveAll(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("unbound", "normal")
	p["agent"], p["permissionMode"] = "codex", "deny-all"
	f := s.call("session/open", p)
	wantError(t, "deny-all with no asking mode", f, -32000, "PERMISSION_POLICY_UNENFORCEABLE")
	if pr := proofOf(t, f.Error); !pr.Complete {
		t.Errorf("refused open's proof not complete: %+v", pr)
	}
	waitNoMarked(t, e.mark, e.work, 5*time.Second)

	p["permissionMode"] = "approve-all"
	var o agentOpen
	s.mustCall("session/open", p, &o)
	if o.Binding.Bound || o.Binding.Via != "none" || o.Binding.Mode != "default" {
		t.Errorf("approve-all open of an unbindable agent: permissionBinding %+v, want unbound via none in mode default", o.Binding)
	}
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestBinding_SetModeToAutonomousModeRefused: under a policy that needs
// asking, session/setMode (and setConfigOption of the mode) to a mode
// outside the profile's asking modes is refused and changes nothing.
func TestBinding_SetModeToAutonomousModeRefused(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("claude-like", "normal")
	p["agent"], p["permissionMode"] = "claude", "deny-all"
	var o agentOpen
	s.mustCall("session/open", p, &o)
	if !o.Binding.Bound || o.Binding.Mode != "default" || o.Binding.Via != "agent default" {
		t.Fatalf("permissionBinding %+v, want bound in default (agent default)", o.Binding)
	}
	wantError(t, "setMode plan under deny-all", s.call("session/setMode", map[string]any{"session": o.Session, "mode": "plan"}),
		-32000, "PERMISSION_POLICY_UNENFORCEABLE")
	var st struct {
		Modes struct {
			Current string `json:"currentModeId"`
		} `json:"modes"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.Modes.Current != "default" {
		t.Errorf("mode after a refused setMode: %q", st.Modes.Current)
	}
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestBinding_WorkspaceGrantsRefusedBeforeLaunch: a .codex/ in cwd or any
// directory above it can grant codex permissions that no setting turns off
// (codex-acp 2.x trusts every session root): under a policy that needs
// asking the open is refused before anything runs; under approve-all it
// opens.
func TestBinding_WorkspaceGrantsRefusedBeforeLaunch(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	if err := os.MkdirAll(e.work+"/.codex/rules", 0o755); err != nil {
		t.Fatal(err)
	}
	sub := e.work + "/deep/er"
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := seedRecordFile(t)
	p := seedOpenParams(e, "grants", rec, "")
	p["agent"], p["cwd"], p["permissionMode"] = "codex", sub, "deny-all"
	wantError(t, "deny-all below a .codex/", s.call("session/open", p), -32000, "PERMISSION_POLICY_UNENFORCEABLE")
	if _, err := os.Stat(rec); err == nil {
		t.Errorf("the agent was launched although the open was refused before launch")
	}
	p["permissionMode"] = "approve-all"
	s.mustCall("session/open", p, nil)
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}
