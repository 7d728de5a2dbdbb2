package session

import (
	"context"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// permissionTimeout is the bound on one host escalation: the open's
// permissionTimeoutMs, else config.Config.PermissionTimeout (default 10 min).
func (s *Actor) permissionTimeout() time.Duration {
	if p := s.plan.Params.PermissionTimeoutMs; p != nil {
		return time.Duration(*p) * time.Millisecond
	}
	if d := s.m.Config.PermissionTimeout; d > 0 {
		return d
	}
	return protocol.DefaultPermissionTimeoutMs * time.Millisecond
}

// boundEscalation arms the permission bound of one host escalation
// (docs/protocol.md §18.3): when permissionTimeout passes with the ask
// still pending in turn t, the actor decides it (decideTimedOut), then
// cancel ends the host request. The bound is the actor's own timer, so it
// holds whether or not the Host honours its context. Stop the returned
// timer when the host answers.
func (s *Actor) boundEscalation(t *turn, ask *acpclient.PermissionAsk, pa *pendingAsk, cancel context.CancelFunc) *time.Timer {
	return time.AfterFunc(s.permissionTimeout(), func() {
		s.post(func() {
			if s.turns.turn == t && t.pending[ask] != nil {
				s.decideTimedOut(t, ask, pa)
			}
		})
		cancel() // after the decision is queued: a host error that follows finds the ask decided
	})
}

// decideTimedOut decides an escalation the host did not answer within
// permissionTimeoutMs as nonInteractivePermissions says, audited with
// decision "timeout" (docs/protocol.md §18.3): "deny" answers the agent
// with a reject option; "fail" answers it cancelled and fails the turn
// with PERMISSION_APPROVAL_REQUIRED, as without a host.
func (s *Actor) decideTimedOut(t *turn, ask *acpclient.PermissionAsk, pa *pendingAsk) {
	s.decideUnanswered(t, ask, pa, pa.rule+"; permissionTimeoutMs", protocol.DecisionTimeout,
		"the host did not answer within "+s.permissionTimeout().String())
}
