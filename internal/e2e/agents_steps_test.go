package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Steps of runAgentSuite (agents_test.go) that read frames or the process
// table.

var answersMu sync.Mutex

// workspaceGrants are, per agent, files a repository may hold that grant
// the agent's shell tool without asking (each seen to work against a
// policy that did not isolate the workspace).
var workspaceGrants = map[string]map[string]string{
	"codex":        {".codex/rules/default.rules": "prefix_rule(pattern=[\"touch\"], decision=\"allow\")\n"},
	"codex-legacy": {".codex/rules/default.rules": "prefix_rule(pattern=[\"touch\"], decision=\"allow\")\n"},
	"claude": {".claude/settings.local.json": `{"permissions":{"allow":["Bash(*)"]}}`,
		".claude/settings.json": `{"permissions":{"allow":["Bash(*)"]}}`},
	"gemini": {".gemini/settings.json": `{"tools":{"allowed":["run_shell_command"]}}`},
	"opencode": {"opencode.json": `{"agent":{"build":{"permission":{"bash":"allow"}}}}`,
		".opencode/opencode.json": `{"agent":{"build":{"permission":{"bash":"allow"}}}}`},
}

// plantGrants writes the agent's workspaceGrants into the workspace.
func (a *agentRun) plantGrants() {
	a.t.Helper()
	for rel, body := range workspaceGrants[a.name] {
		path := filepath.Join(a.work, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			a.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			a.t.Fatal(err)
		}
	}
}

// removeGrants removes what plantGrants wrote.
func (a *agentRun) removeGrants() {
	a.t.Helper()
	for rel := range workspaceGrants[a.name] {
		top := strings.SplitN(rel, "/", 2)[0]
		if err := os.RemoveAll(filepath.Join(a.work, top)); err != nil {
			a.t.Fatal(err)
		}
	}
}

// answerWith makes the host answer the session's next escalations with the
// option of that kind (allow_once, reject_once).
func (a *agentRun) answerWith(session, kind string) {
	answersMu.Lock()
	a.answers[session] = kind
	answersMu.Unlock()
}

// onPermission answers session/requestPermission as answerWith said; a
// session without an answer gets cancelled.
func (a *agentRun) onPermission(f *frame) any {
	var p struct {
		Session string `json:"session"`
		Options []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
	}
	_ = json.Unmarshal(f.Params, &p)
	answersMu.Lock()
	kind := a.answers[p.Session]
	answersMu.Unlock()
	for _, o := range p.Options {
		if o.Kind == kind {
			return map[string]string{"outcome": "selected", "optionId": o.OptionID}
		}
	}
	return map[string]string{"outcome": "cancelled"}
}

// wantDecision waits for a session/permission audit of session with the
// decision.
func (a *agentRun) wantDecision(session, decision string) {
	a.t.Helper()
	a.s.waitNote("session/permission", 10*time.Second, func(raw json.RawMessage) bool {
		var n struct {
			Session  string `json:"session"`
			Decision string `json:"decision"`
		}
		return json.Unmarshal(raw, &n) == nil && n.Session == session && n.Decision == decision
	})
}

// wantEscalated checks that a session/requestPermission of kind reached
// the host for session, and that the decision was audited as escalated.
func (a *agentRun) wantEscalated(session, kind string) {
	a.t.Helper()
	a.s.mu.Lock()
	raws := append([][]byte(nil), a.s.raw...)
	a.s.mu.Unlock()
	found := false
	for _, r := range raws {
		var f struct {
			Method string `json:"method"`
			Params struct {
				Session string `json:"session"`
				Kind    string `json:"kind"`
			} `json:"params"`
		}
		if json.Unmarshal(r, &f) == nil && f.Method == "session/requestPermission" && f.Params.Session == session {
			found = true
			if f.Params.Kind != kind {
				a.t.Errorf("escalated request kind %q, want %q: %s", f.Params.Kind, kind, truncate(string(r), 800))
			}
		}
	}
	if !found {
		a.t.Fatalf("no session/requestPermission reached the host for %s", session)
	}
}

// setModel selects a listed model other than the current one (the current
// one when it is the only one) and checks the sidecar verified it.
func (a *agentRun) setModel(o agentOpen) {
	a.t.Helper()
	if o.Models == nil || len(o.Models.Available) == 0 {
		if noModels[a.name] {
			a.t.Logf("%s reports no models (docs/agents.md): no model to change", a.name)
			return
		}
		a.t.Fatalf("%s reports no models: %+v", a.name, o.Models)
	}
	want := o.Models.Available[0]
	for _, m := range o.Models.Available {
		if m != o.Models.Current {
			want = m
			break
		}
	}
	var res struct {
		Models struct {
			Current string `json:"currentModelId"`
		} `json:"models"`
	}
	a.s.mustCall("session/setModel", map[string]any{"session": o.Session, "model": want}, &res)
	if res.Models.Current != want {
		a.t.Errorf("setModel %q: the sidecar reports %q", want, res.Models.Current)
	}
}

// wantListedModel checks that session/status reports a current model the
// agent lists (codex-acp 2.x reports model and effort as two config
// options after a turn; the listed id carries both).
func (a *agentRun) wantListedModel(session string) {
	a.t.Helper()
	var st struct {
		Models *struct {
			Current   string   `json:"currentModelId"`
			Available []string `json:"availableModelIds"`
		} `json:"models"`
	}
	a.s.mustCall("session/status", map[string]any{"session": session}, &st)
	if st.Models == nil {
		return
	}
	for _, m := range st.Models.Available {
		if m == st.Models.Current {
			return
		}
	}
	a.t.Errorf("status reports model %q, which the agent does not list: %v", st.Models.Current, st.Models.Available)
}

// close closes session; the proof must be complete and nothing of its
// tree alive.
func (a *agentRun) close(session string) proof {
	a.t.Helper()
	var res struct {
		Proof proof `json:"proof"`
	}
	a.s.mustCall("session/close", map[string]any{"session": session, "reason": "e2e"}, &res)
	if !res.Proof.Complete || !res.Proof.Verified.TreeEmpty {
		a.t.Fatalf("close proof not complete: %+v", res.Proof)
	}
	return res.Proof
}

// waitTool waits until the session's sleep tool runs and returns its pid.
func (a *agentRun) waitTool(mark string) int {
	a.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		for _, pid := range markedPids(mark, "") {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			args := bytes.Split(bytes.TrimRight(cmd, "\x00"), []byte{0})
			if len(args) >= 2 && bytes.HasSuffix(args[0], []byte("sleep")) && string(args[1]) == "45" {
				return pid
			}
		}
		time.Sleep(20 * time.Millisecond) // polling the process table, bounded
	}
	a.t.Fatalf("the tool never ran (stub commands %v)\nstderr:\n%s", a.stub.Stats().Commands, a.s.stderrText())
	return 0
}

// waitExited waits for session/exited of session.
func (a *agentRun) waitExited(session string) {
	a.t.Helper()
	a.s.waitNote("session/exited", 30*time.Second, func(raw json.RawMessage) bool {
		var n struct {
			Session string `json:"session"`
		}
		return json.Unmarshal(raw, &n) == nil && n.Session == session
	})
}

// waitProof waits for a cleanup/proof of session with origin.
func (a *agentRun) waitProof(session, origin string) proof {
	a.t.Helper()
	var got proof
	a.s.waitNote("cleanup/proof", 30*time.Second, func(raw json.RawMessage) bool {
		var n struct {
			Proof proof `json:"proof"`
		}
		if json.Unmarshal(raw, &n) != nil || n.Proof.Session != session || string(n.Proof.Origin) != origin {
			return false
		}
		got = n.Proof
		return true
	})
	return got
}

func itoa(n int) string { return strconv.Itoa(n) }

// wantNoFileIn fails if dir/name exists, or if the model never asked for
// a command naming it (then its absence proves nothing).
func (a *agentRun) wantNoFileIn(dir, name string) {
	a.t.Helper()
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		a.t.Fatalf("%s/%s exists: the agent wrote outside its sandbox", dir, name)
	}
	asked := false
	for _, c := range a.stub.Stats().Commands {
		asked = asked || strings.Contains(c, name)
	}
	if !asked {
		a.t.Fatalf("the model never asked to write %s: its absence proves nothing", name)
	}
}
