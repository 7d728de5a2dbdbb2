package session

import (
	"context"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/policy"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// pendingAsk is a permission request waiting for the host.
type pendingAsk struct {
	toolCallID string
	kind       string
	rule       string
	options    []policy.Option
	size       int // bytes of the ACP params (the turn's pending-ask bound)
}

// onPermission answers an ACP session/request_permission on the actor.
func (s *Actor) onPermission(ask *acpclient.PermissionAsk) {
	parsed, why := policy.ParseAsk(ask.Params)
	if ask.Malformed != "" {
		why = ask.Malformed
	}
	if why != "" {
		// Refused, not judged: the policy cannot know what the agent
		// meant, and a host might read it otherwise (docs/protocol.md §20).
		pa := &pendingAsk{toolCallID: parsed.Head.ToolCallID, kind: "other"}
		s.log.Warn("malformed permission request answered cancelled", zap.String("reason", why))
		s.answerPermissionAs(ask, pa, "", "malformed: "+why, protocol.DecisionMalformed)
		return
	}
	head, opts := parsed.Head, parsed.Opts
	kind := policy.AskKind(head, s.turns.toolKinds[head.ToolCallID])
	pa := &pendingAsk{toolCallID: head.ToolCallID, kind: kind, options: opts, size: len(ask.Params)}
	t := s.turns.turn
	if t == nil || t.cancelled || !s.state.Is(protocol.StateTurn) {
		// The authority belongs to a live turn (docs/rules.md#r27).
		pa.rule = "no active turn"
		s.answerPermission(ask, pa, nil, "", "no active turn")
		return
	}
	action, rule := policy.Decide(s.plan.Params, kind)
	pa.rule = rule
	switch action {
	case policy.Approve:
		s.answerPermission(ask, pa, &struct{}{}, policy.ApproveOption(opts), rule)
	case policy.Deny:
		s.answerPermission(ask, pa, nil, policy.RejectOption(opts), rule)
	default:
		s.escalate(t, ask, pa, parsed)
	}
}

// answerPermission answers the agent once: optionID "" sends the
// cancelled outcome. approved non-nil marks an approval in the
// audit notice.
func (s *Actor) answerPermission(ask *acpclient.PermissionAsk, pa *pendingAsk, approved *struct{}, optionID, rule string) {
	decision := protocol.DecisionDenied
	if approved != nil {
		decision = protocol.DecisionApproved
	}
	s.answerPermissionAs(ask, pa, optionID, rule, decision)
}

// answerPermissionAs answers the agent once and audits decision; an
// optionID "" sends the cancelled outcome (audited DecisionCancelled,
// except a timeout, malformed or overflow decision, which stays itself).
func (s *Actor) answerPermissionAs(ask *acpclient.PermissionAsk, pa *pendingAsk, optionID, rule string, decision protocol.Decision) {
	s.settled(ask.ID)
	if t := s.turns.turn; t != nil {
		if _, ok := t.pending[ask]; ok {
			delete(t.pending, ask)
			t.pendingBytes -= pa.size
		}
	}
	optionKind := ""
	if optionID == "" {
		ask.Answer(acp.NewRequestPermissionOutcomeCancelled())
		switch decision {
		case protocol.DecisionTimeout, protocol.DecisionMalformed, protocol.DecisionOverflow:
		default:
			decision = protocol.DecisionCancelled
		}
		optionID = ""
	} else {
		optionKind = policy.PickKind(pa.options, optionID)
		ask.Answer(acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(optionID)))
	}
	var rid *string
	if s.turns.turn != nil {
		r := s.turns.turn.requestID
		rid = &r
	}
	s.pub.Notify(protocol.NotifySessionPermission, protocol.PermissionNotice{Session: s.id, RequestID: rid,
		ToolCallID: pa.toolCallID, Kind: pa.kind, Decision: decision, Rule: rule, OptionID: optionID, OptionKind: optionKind})
}

// escalate sends the ask to the host when it declared permissionRequests,
// else applies nonInteractivePermissions (docs/protocol.md §10). An ask
// beyond the turn's bounds on asks waiting for the host (count and params
// bytes, docs/protocol.md §20) is decided as nonInteractivePermissions
// says too, audited with decision "overflow".
func (s *Actor) escalate(t *turn, ask *acpclient.PermissionAsk, pa *pendingAsk, parsed policy.Ask) {
	if !s.m.Host.PermissionRequests() {
		s.decideUnanswered(t, ask, pa, pa.rule, protocol.DecisionDenied, "the host cannot answer")
		return
	}
	if maxN, maxB := s.m.maxPendingAsks(); policy.Overflows(t.waitingAsks(), t.pendingBytes, pa.size, maxN, maxB) {
		s.decideOverflow(t, ask, pa, maxN, maxB)
		return
	}
	t.pending[ask] = pa
	t.pendingBytes += pa.size
	rid := t.requestID
	s.pub.Notify(protocol.NotifySessionPermission, protocol.PermissionNotice{Session: s.id, RequestID: &rid,
		ToolCallID: pa.toolCallID, Kind: pa.kind, Decision: protocol.DecisionEscalated, Rule: pa.rule})
	params := protocol.PermissionRequestParams{Session: s.id, RequestID: &rid, ToolCall: parsed.ToolCall, Options: parsed.Options,
		Kind: pa.kind, Rule: pa.rule}
	s.pub.JournalRequest(protocol.RequestPermission, params)
	ectx, cancel := context.WithCancelCause(t.ctx)
	bound := s.boundEscalation(t, ask, pa, func() { cancel(nil) })
	s.awaitWithdrawal(ask.ID, func() { s.withdrawPermission(t, ask, pa, cancel) })
	go func() {
		res, err := s.askHost(ectx, params)
		bound.Stop()
		cancel(nil)
		s.post(func() {
			if s.turns.turn != t || t.pending[ask] == nil {
				return // the turn ended (or permissionTimeoutMs decided) first: the late answer changes nothing
			}
			optionID, allow := policy.HostAnswer(pa.options, res, err)
			var approved *struct{}
			if allow {
				approved = &struct{}{}
			}
			s.answerPermission(ask, pa, approved, optionID, "host")
		})
	}()
}

// askHost sends one escalation to the host, off the actor, and asks again
// (a new request, answerRefused set) while the host's answer is refused
// -32602, at most policy.MaxRefusedAnswers times (policy.AskAgain); the
// last refusal is returned.
// Each request sent is journaled, as the first was (escalate).
func (s *Actor) askHost(ctx context.Context, params protocol.PermissionRequestParams) (protocol.PermissionRequestResult, error) {
	for refused := 0; ; refused++ {
		res, err := s.m.Host.RequestPermission(ctx, params)
		pe := policy.AskAgain(err, refused)
		if pe == nil || ctx.Err() != nil {
			return res, err
		}
		s.log.Warn("the host's permission answer was refused; asking again", zap.String("field", pe.Data.Field))
		params.AnswerRefused = &protocol.ErrorObject{Code: pe.RPCCode, Message: pe.Message, Data: pe.Data}
		again := params
		if !s.post(func() { s.pub.JournalRequest(protocol.RequestPermission, again) }) {
			return res, err
		}
	}
}
