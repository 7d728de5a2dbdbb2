package adapter

import (
	"context"
	"errors"
	"time"
)

// errPermissionTimeout is the cause of a host escalation's context that
// permissionTimeoutMs ended (docs/protocol.md §16.3).
var errPermissionTimeout = errors.New("permissionTimeoutMs elapsed")

// permissionTimeout is the bound on one host escalation: the open's
// permissionTimeoutMs, else Config.PermissionTimeout (default 10 min).
func (s *session) permissionTimeout() time.Duration {
	if p := s.open.PermissionTimeoutMs; p != nil {
		return time.Duration(*p) * time.Millisecond
	}
	if d := s.m.cfg.PermissionTimeout; d > 0 {
		return d
	}
	return 10 * time.Minute
}

// escalationContext is the context of one host escalation: the turn's,
// ended also by permissionTimeout with cause errPermissionTimeout.
func (s *session) escalationContext(t *turn) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(t.ctx, s.permissionTimeout(), errPermissionTimeout)
}

// timedOut reports whether ctx ended by its permission bound (not by the
// turn's end or timeout).
func timedOut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errPermissionTimeout)
}

// decideTimedOut decides an escalation the host did not answer within
// permissionTimeoutMs as nonInteractivePermissions says, audited with
// decision "timeout" (docs/protocol.md §16.3): "deny" answers the agent
// with a reject option; "fail" answers it cancelled and fails the turn
// with PERMISSION_APPROVAL_REQUIRED, as without a host.
func (s *session) decideTimedOut(t *turn, ask *permissionAsk, pa *pendingAsk) {
	rule := pa.rule + "; permissionTimeoutMs; nonInteractivePermissions:" + s.open.NonInteractivePermissions
	if s.open.NonInteractivePermissions == "fail" {
		t.failErr = permissionRequiredError(pa.kind, "the host did not answer within "+s.permissionTimeout().String())
		s.answerPermissionAs(ask, pa, "", rule, decisionTimeout)
		s.cancelTurn(&t.requestID, "permission approval required")
		return
	}
	s.answerPermissionAs(ask, pa, pickOption(pa.options, "reject_once", "reject_always"), rule, decisionTimeout)
}
