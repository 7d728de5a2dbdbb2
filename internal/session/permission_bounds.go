package session

import (
	"context"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/policy"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// maxPendingAsks returns the per-turn bounds on asks waiting for the host:
// count and params bytes (config.Config.Caps.MaxPendingAsks, MaxPendingAskBytes).
func (m *Shared) maxPendingAsks() (n, bytes int) {
	n, bytes = m.Config.Caps.MaxPendingAsks, m.Config.Caps.MaxPendingAskBytes
	if n <= 0 {
		n = protocol.DefaultMaxPendingAsks
	}
	if bytes <= 0 {
		bytes = protocol.DefaultMaxPendingAskBytes
	}
	return n, bytes
}

// decideOverflow decides an escalation the turn has no room for — maxN
// asks already wait for the host, or this one's params would take their
// bytes past maxB — as nonInteractivePermissions says, without asking the
// host, audited with decision "overflow" (docs/protocol.md §20): "deny"
// answers the agent with a reject option; "fail" answers it cancelled and
// fails the turn with PERMISSION_APPROVAL_REQUIRED. An agent flooding
// asks while the host is slow thus holds at most the bound in memory.
func (s *Actor) decideOverflow(t *turn, ask *acpclient.PermissionAsk, pa *pendingAsk, maxN, maxB int) {
	s.decideUnanswered(t, ask, pa, pa.rule+"; "+policy.OverflowRule(maxN, maxB), protocol.DecisionOverflow,
		"too many asks are waiting for the host")
}

// decideUnanswered decides an escalation the host will not answer — it
// cannot (no capabilities.permissionRequests), did not in time, or the
// turn has no room for it — as nonInteractivePermissions says
// (policy.Unanswered), audited with decision and rule followed by
// "; nonInteractivePermissions:<deny|fail>": "deny" answers the agent
// with a reject option; "fail" answers it cancelled and fails the turn
// with PERMISSION_APPROVAL_REQUIRED, whose message ends with why.
func (s *Actor) decideUnanswered(t *turn, ask *acpclient.PermissionAsk, pa *pendingAsk, rule string, decision protocol.Decision, why string) {
	optionID, fail := policy.Unanswered(s.plan.Params, pa.options)
	if fail {
		t.failErr = policy.PermissionRequiredError(pa.kind, why)
		s.answerPermissionAs(ask, pa, "", rule+"; nonInteractivePermissions:fail", decision)
		s.cancelTurn(&t.requestID, "permission approval required")
		return
	}
	s.answerPermissionAs(ask, pa, optionID, rule+"; nonInteractivePermissions:deny", decision)
}

// withdrawPermission settles an escalation the agent withdrew with
// $/cancel_request (docs/protocol.md §22): the agent is answered -32800,
// the host's session/requestPermission is cancelled with $/cancelRequest
// (a late answer changes nothing: the ask is no longer pending), and the
// withdrawal is audited with decision "withdrawn".
func (s *Actor) withdrawPermission(t *turn, ask *acpclient.PermissionAsk, pa *pendingAsk, cancel context.CancelCauseFunc) {
	if s.turns.turn != t || t.pending[ask] == nil {
		return
	}
	delete(t.pending, ask)
	t.pendingBytes -= pa.size
	if ask.Fail != nil {
		ask.Fail(acpclient.CodeRequestCancelled, "request cancelled")
	}
	withdrawHost(cancel)
	rid := t.requestID
	s.pub.Notify(protocol.NotifySessionPermission, protocol.PermissionNotice{Session: s.id, RequestID: &rid,
		ToolCallID: pa.toolCallID, Kind: pa.kind, Decision: protocol.DecisionWithdrawn, Rule: "agent $/cancel_request"})
}
