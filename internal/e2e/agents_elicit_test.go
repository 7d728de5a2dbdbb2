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
	a := newAgentRun(t, "claude")
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
				Mode            string `json:"mode"`
				RequestedSchema struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"requestedSchema"`
			} `json:"elicitation"`
		}
		_ = json.Unmarshal(f.Params, &p)
		for k := range p.Elicitation.RequestedSchema.Properties {
			if !strings.HasSuffix(k, "_custom") {
				return map[string]any{"action": "accept", "content": map[string]any{k: modelstub.AskOptions[0]}}
			}
		}
		return map[string]any{"action": "decline"}
	}
	initElicit(a.s, map[string]bool{"form": true})
	o := a.open("ask", map[string]any{"permissionMode": "approve-all"})
	text := a.turnText(o.Session, "t1", "ask me\nask: Proceed with the plan?")
	var f *frame
	select {
	case f = <-asked:
	case <-time.After(10 * time.Second):
		t.Fatalf("no session/elicitation reached the host; turn text %q", text)
	}
	if !strings.Contains(string(f.Params), "Proceed with the plan?") || !strings.Contains(string(f.Params), `"mode":"form"`) {
		t.Errorf("session/elicitation params %s, want the question as a form", f.Params)
	}
	if n := oneElicitNote(t, a.s, o.Session); n.Action != "accept" || n.Rule != "host" {
		t.Errorf("audit %+v, want accept by host", n)
	}
	if !strings.Contains(text, modelstub.DoneText) {
		t.Errorf("turn text %q lacks the model's answer to the tool result", text)
	}
	a.close(o.Session)
}
