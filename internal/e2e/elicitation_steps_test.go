package e2e

// Steps of the elicitation and withdrawal tests (docs/protocol.md §22):
// a host that declares elicitation modes, the session/elicitation
// requests it receives, the session/elicitationDecided audit, and the
// fault agent's reports ("elicit caps: …", "elicit: <action> <content>").

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// elicitDecided is a session/elicitationDecided notice.
type elicitDecided struct {
	Session       string  `json:"session"`
	RequestID     *string `json:"requestId"`
	ElicitationID string  `json:"elicitationId"`
	Mode          string  `json:"mode"`
	Action        string  `json:"action"`
	Rule          string  `json:"rule"`
	Error         *struct {
		Code int `json:"code"`
		Data struct {
			Code  string `json:"code"`
			Field string `json:"field"`
		} `json:"data"`
	} `json:"error"`
}

// initElicit initializes s as a host that answers permissions and the
// elicitation modes given (nil: the member is left out).
func initElicit(s *sidecar, modes map[string]bool) {
	caps := map[string]any{"permissionRequests": true}
	if modes != nil {
		caps["elicitation"] = modes
	}
	s.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientInfo": map[string]string{"name": "e2e", "version": "0"},
		"capabilities": caps}, nil)
}

// elicitNotes returns the session/elicitationDecided notices of session.
func elicitNotes(s *sidecar, session string) []elicitDecided {
	var out []elicitDecided
	for _, f := range s.notesOf("session/elicitationDecided") {
		var n elicitDecided
		if json.Unmarshal(f.Params, &n) == nil && n.Session == session {
			out = append(out, n)
		}
	}
	return out
}

// oneElicitNote waits (bounded) for session's first elicitation audit and
// fails unless it is the only one.
func oneElicitNote(t *testing.T, s *sidecar, session string) elicitDecided {
	t.Helper()
	s.waitNote("session/elicitationDecided", 20*time.Second, func(p json.RawMessage) bool {
		var n elicitDecided
		return json.Unmarshal(p, &n) == nil && n.Session == session
	})
	ns := elicitNotes(s, session)
	if len(ns) != 1 {
		t.Errorf("elicitation audits %+v, want exactly one", ns)
	}
	return ns[0]
}

// elicitReport is the fault agent's report of turn requestID: the
// elicitation capabilities it was offered and the answer it got.
func elicitReport(s *sidecar, session, requestID string) (caps, answer string) {
	for _, c := range agentChunks(s, session, requestID) {
		switch {
		case strings.HasPrefix(c, "elicit caps: "):
			caps = strings.TrimPrefix(c, "elicit caps: ")
		case strings.HasPrefix(c, "elicit: "):
			answer = strings.TrimPrefix(c, "elicit: ")
		}
	}
	return caps, answer
}

// elicitHost collects the sidecar → host requests; answer decides each
// reply (nil: the test answers later, or never).
func elicitHost(s *sidecar, answer func(f *frame) any) chan *frame {
	ch := make(chan *frame, 16)
	s.onRequest = func(f *frame) any {
		ch <- f
		return answer(f)
	}
	return ch
}

// nextRequest waits (bounded) for the next host request, of method.
func nextRequest(t *testing.T, ch chan *frame, method string) *frame {
	t.Helper()
	select {
	case f := <-ch:
		if f.Method != method {
			t.Fatalf("host got %s, want %s", f.Method, method)
		}
		return f
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s reached the host", method)
	}
	return nil
}

// waitHostCancel waits (bounded) for the sidecar's $/cancelRequest of its
// own request id.
func waitHostCancel(t *testing.T, s *sidecar, id json.RawMessage) {
	t.Helper()
	s.waitNote("$/cancelRequest", 20*time.Second, func(p json.RawMessage) bool {
		var c struct {
			ID json.RawMessage `json:"id"`
		}
		return json.Unmarshal(p, &c) == nil && string(c.ID) == string(id)
	})
}

// elicitTurn opens a fault-agent session with modes (and extra open
// params), runs one turn "t1" and returns the session and the turn.
func elicitTurn(t *testing.T, e *faultEnv, s *sidecar, key, modes string, extra map[string]any) (string, turnResult) {
	t.Helper()
	p := acpCheckedParams(t, e, key, modes)
	for k, v := range extra {
		p[k] = v
	}
	var o openResult
	s.mustCall("session/open", p, &o)
	res := decodeResult[turnResult](t, key+" turn", s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "ask"}))
	return o.Session, res
}
