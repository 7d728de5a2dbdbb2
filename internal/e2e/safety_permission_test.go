package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestPermission_UnansweredEscalationIsDecidedAtPermissionTimeout
// (docs/protocol.md §18.3): a host that declared permissionRequests but
// never answers does not hold the turn: after permissionTimeoutMs the
// escalation is decided as nonInteractivePermissions says — deny gives
// the agent a reject option and the turn completes; fail answers it
// cancelled and the turn fails PERMISSION_APPROVAL_REQUIRED — audited
// with decision "timeout", not before the bound. A late host answer is
// ignored and the connection keeps working.
func TestPermission_UnansweredEscalationIsDecidedAtPermissionTimeout(t *testing.T) {
	for _, c := range []struct {
		nonInteractive, wantStatus, wantChunk, wantOption string
	}{{"deny", "completed", "permission: selected reject-once", "reject-once"},
		{"fail", "failed", "permission: cancelled", ""}} {
		t.Run(c.nonInteractive, func(t *testing.T) {
			e := newFaultEnv(t)
			s := startSidecar(t, seedArgs(e)...)
			h := serveHost(s, func(n int, f *frame) any {
				return nil // never answered in time
			})
			s.initialize(true)
			p := e.openParams("ptimeout-"+c.nonInteractive, "permission=execute")
			p["permissionTimeoutMs"] = 300
			p["nonInteractivePermissions"] = c.nonInteractive
			var o openResult
			s.mustCall("session/open", p, &o)
			var res turnResult
			// The bound starts when the sidecar asks, after the prompt was
			// sent: the turn's time is a lower bound of the bound's wait that
			// does not depend on when the host's handler got to run.
			begun := time.Now()
			s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "run it"}, &res)
			req, _ := h.next(t, 5*time.Second)
			if waited := time.Since(begun); waited < 300*time.Millisecond {
				t.Errorf("turn decided %v after the prompt, before permissionTimeoutMs 300", waited)
			}
			if res.Status != c.wantStatus {
				t.Errorf("turn status %q, want %q (%+v)", res.Status, c.wantStatus, res.Error)
			}
			if c.nonInteractive == "fail" && (res.Error == nil || res.Error.Code != "PERMISSION_APPROVAL_REQUIRED") {
				t.Errorf("turn error %+v, want PERMISSION_APPROVAL_REQUIRED", res.Error)
			}
			n := finalDecision(t, s, o.Session, "t1")
			if n.Decision != "timeout" || n.OptionID != c.wantOption || !strings.Contains(n.Rule, "permissionTimeoutMs") {
				t.Errorf("audit %+v, want decision timeout, optionId %q, rule naming permissionTimeoutMs", n, c.wantOption)
			}
			if got := permissionChunk(s, o.Session, "t1"); got != c.wantChunk {
				t.Errorf("the agent reported %q, want %q", got, c.wantChunk)
			}
			// The host's late answer changes nothing; the session still works.
			s.send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": selected("allow-once")})
			var st map[string]any
			s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
			if st["state"] != "open" {
				t.Errorf("state after the turn %v, want open", st["state"])
			}
			seedCloseProof(t, s, o.Session, nil)
		})
	}
}
