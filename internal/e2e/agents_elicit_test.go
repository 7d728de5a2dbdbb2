package e2e

// Real agents' elicitation (docs/agents.md): claude-agent-acp presents
// Claude Code's AskUserQuestion tool as an ACP form elicitation to a
// client that declared form elicitation (and withholds the tool from one
// that did not). The loopback model stub calls that tool for an `ask:`
// line (internal/modelstub/askuser.go).

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/modelstub"
)

// TestAgent_ClaudeQuestionIsAnElicitation: a Claude turn whose model
// calls AskUserQuestion reaches a host that declared form elicitation as
// session/elicitation (a form with the question's options); the host's
// accept goes back to Claude, whose tool result the model answers; the
// audit says accept by host.
func TestAgent_ClaudeQuestionIsAnElicitation(t *testing.T) {
	t.Parallel()
	agentQuestion(t, "claude", nil)
}

// TestAgent_CodexQuestionIsAnElicitation: the same for codex-acp, whose
// request_user_input tool codex offers in its plan collaboration mode
// (config option collaboration_mode, set through session/setConfigOption).
func TestAgent_CodexQuestionIsAnElicitation(t *testing.T) {
	t.Parallel()
	agentQuestion(t, "codex", func(a *agentRun, session string) {
		a.s.mustCall("session/setConfigOption", map[string]any{"session": session, "key": "collaboration_mode", "value": "plan"}, nil)
	})
}

// agentQuestion runs one turn of agent name whose model asks a question
// (an ask: line) against a host that declared form elicitation and
// accepts the first option; setup (may be nil) runs after the open.
func agentQuestion(t *testing.T, name string, setup func(a *agentRun, session string)) {
	a := newAgentRun(t, name)
	acpTapped(t, a)
	// A sidecar of its own, whose host declares form elicitation.
	a.stateDir = t.TempDir()
	a.s = startSidecar(t, "--state-dir", a.stateDir, "--handshake-timeout-ms", "55000")
	asked := make(chan *frame, 4)
	a.s.onRequest = func(f *frame) any {
		if f.Method != "session/elicitation" {
			return a.onPermission(f)
		}
		asked <- f
		var p struct {
			Elicitation struct {
				RequestedSchema struct {
					Properties map[string]json.RawMessage `json:"properties"`
					Required   []string                   `json:"required"`
				} `json:"requestedSchema"`
			} `json:"elicitation"`
		}
		_ = json.Unmarshal(f.Params, &p)
		props := p.Elicitation.RequestedSchema.Properties
		key := ""
		for _, k := range append(p.Elicitation.RequestedSchema.Required, "q1", "question_0") {
			if _, ok := props[k]; ok && key == "" {
				key = k
			}
		}
		if key == "" {
			return map[string]any{"action": "decline"}
		}
		return map[string]any{"action": "accept", "content": map[string]any{key: modelstub.AskOptions[0]}}
	}
	initElicit(a.s, map[string]bool{"form": true})
	o := a.open("ask", map[string]any{"permissionMode": "approve-all"})
	if setup != nil {
		setup(a, o.Session)
	}
	text := a.turnText(o.Session, "t1", "ask me\nask: Proceed with the plan?")
	var f *frame
	select {
	case f = <-asked:
	case <-time.After(10 * time.Second):
		t.Fatalf("no session/elicitation reached the host; turn text %q; stub %+v", text, a.stub.Stats())
	}
	t.Logf("session/elicitation: %s", f.Params)
	if !strings.Contains(string(f.Params), "Proceed with the plan?") || !strings.Contains(string(f.Params), `"mode":"form"`) {
		t.Errorf("session/elicitation params %s, want the question as a form", f.Params)
	}
	if n := oneElicitNote(t, a.s, o.Session); n.Action != "accept" || n.Rule != "host" {
		t.Errorf("audit %+v (error %+v), want accept by host", n, n.Error)
	}
	if !strings.Contains(text, modelstub.DoneText) {
		t.Errorf("turn text %q lacks the model's answer to the tool result", text)
	}
	a.close(o.Session)
}
