package e2e

import (
	"encoding/json"
	"strings"
)

// agentSessions is the agent suite's step for docs/protocol.md §23: an
// agent that offers ACP session/list (sessionCapabilities.list) answers
// session/agentSessions with a page whose sessions are objects with a
// sessionId, the open one among them (the only session of the suite's
// fresh environment); one that does not is UNSUPPORTED_CONTROL. The suite
// logs which `_…` notifications the agent sent (docs/agents.md records
// what each agent does).
func (a *agentRun) agentSessions(session, backend string) {
	t := a.t
	t.Helper()
	f := a.s.call("session/agentSessions", map[string]any{"session": session, "cwd": a.work})
	if f.Error != nil {
		if d := wantError(t, a.name+" session/agentSessions", f, -32000, "UNSUPPORTED_CONTROL"); d.Code == "UNSUPPORTED_CONTROL" {
			t.Logf("%s: no session/list (UNSUPPORTED_CONTROL)", a.name)
		}
		return
	}
	var page struct {
		Sessions []struct {
			SessionID string `json:"sessionId"`
		} `json:"sessions"`
		NextCursor *string `json:"nextCursor"`
	}
	if err := json.Unmarshal(f.Result, &page); err != nil || page.Sessions == nil {
		t.Errorf("%s session/agentSessions result %s: %v", a.name, truncate(string(f.Result), 400), err)
		return
	}
	listed := false
	for _, s := range page.Sessions {
		if s.SessionID == "" {
			t.Errorf("%s listed a session without sessionId: %s", a.name, truncate(string(f.Result), 400))
		}
		listed = listed || s.SessionID == backend
	}
	if !listed {
		// The suite's environment holds this one session: a list that
		// misses it lists nothing useful.
		t.Errorf("%s session/list does not list the open session %s: %s", a.name, backend, truncate(string(f.Result), 400))
	}
	var ext []string
	for _, n := range a.s.notesOf("session/extNotification") {
		var p struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(n.Params, &p) == nil && !contains(ext, p.Method) {
			ext = append(ext, p.Method)
		}
	}
	t.Logf("%s: session/list offline: %d sessions on the first page, the open one listed: %v; `_` notifications: %s",
		a.name, len(page.Sessions), listed, strings.Join(ext, ", "))
}
