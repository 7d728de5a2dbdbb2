package adapter

import (
	"context"
	"encoding/json"
	"errors"

	"strings"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/strictjson"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// pendingAsk is a permission request waiting for the host.
type pendingAsk struct {
	toolCallID string
	kind       string
	rule       string
	options    []permOption
	size       int // bytes of the ACP params (the turn's pending-ask bound)
}

type permOption struct {
	OptionID string `json:"optionId"`
	Kind     string `json:"kind"`
}

type toolCallHead struct {
	ToolCallID string                     `json:"toolCallId"`
	Kind       string                     `json:"kind"`
	Title      string                     `json:"title"`
	RawInput   map[string]json.RawMessage `json:"rawInput"`
}

// policyKind is the ToolKind the policy judges a permission request by:
// the agent's kind, inferred from the title when missing, except that a
// tool call carrying a shell command (rawInput "command" or "cmd") is
// always "execute". An agent's label says what the command looks like,
// not what it does: codex-acp 0.16 labels `find . -delete` "search" and
// `cat a | tee b` "read" (docs/agents.md), which approve-reads would
// approve.
func policyKind(head toolCallHead) string {
	kind := head.Kind
	if !protocol.ToolKinds[kind] {
		kind = inferKind(head.Title)
	}
	if readKinds[kind] || kind == "other" {
		for _, k := range []string{"command", "cmd"} {
			if v, ok := head.RawInput[k]; ok && len(v) > 0 && string(v) != "null" && string(v) != `""` {
				return "execute"
			}
		}
	}
	return kind
}

// readKinds are the ToolKinds approve-reads approves.
var readKinds = map[string]bool{"read": true, "search": true, "think": true}

// inferKind guesses a ToolKind from a tool call title when the agent sent
// none (docs/protocol.md §10: "inferred from the title when missing").
func inferKind(title string) string {
	t := strings.ToLower(title)
	switch {
	case strings.Contains(t, "read") || strings.Contains(t, "view") || strings.Contains(t, "cat "):
		return "read"
	case strings.Contains(t, "delete") || strings.Contains(t, "remove") || strings.HasPrefix(t, "rm "):
		return "delete"
	case strings.Contains(t, "move") || strings.Contains(t, "rename"):
		return "move"
	case strings.Contains(t, "edit") || strings.Contains(t, "write") || strings.Contains(t, "patch"):
		return "edit"
	case strings.Contains(t, "search") || strings.Contains(t, "grep") || strings.Contains(t, "find"):
		return "search"
	case strings.Contains(t, "fetch") || strings.Contains(t, "http"):
		return "fetch"
	case strings.Contains(t, "run") || strings.Contains(t, "exec") || strings.Contains(t, "command") || strings.Contains(t, "shell"):
		return "execute"
	}
	return "other"
}

// decide applies permissionPolicy then permissionMode; it returns
// "approve", "deny" or "escalate" and the rule that decided.
func decide(p protocol.OpenParams, kind string) (action, rule string) {
	if pp := p.PermissionPolicy; pp != nil {
		for _, r := range []struct {
			list   []string
			action string
			rule   string
		}{{pp.AutoDeny, "deny", "permissionPolicy.autoDeny"}, {pp.AutoApprove, "approve", "permissionPolicy.autoApprove"},
			{pp.Escalate, "escalate", "permissionPolicy.escalate"}} {
			if contains(r.list, kind) {
				return r.action, r.rule
			}
		}
		if pp.DefaultAction != "" {
			return pp.DefaultAction, "permissionPolicy.defaultAction"
		}
	}
	switch p.PermissionMode {
	case "approve-all":
		return "approve", "permissionMode:approve-all"
	case "deny-all":
		return "deny", "permissionMode:deny-all"
	default:
		if readKinds[kind] {
			return "approve", "permissionMode:approve-reads"
		}
		return "escalate", "permissionMode:approve-reads"
	}
}

func pickOption(opts []permOption, kinds ...string) string {
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return o.OptionID
			}
		}
	}
	return ""
}

// parsedAsk is an ACP session/request_permission's params as the policy
// reads them; toolCall and options are the agent's, cleaned for the host
// (jsonl.CleanRaw).
type parsedAsk struct {
	toolCall json.RawMessage
	options  json.RawMessage
	head     toolCallHead
	opts     []permOption
}

// Member names the policy reads: a key differing from one of them only by
// case makes an ask malformed (strictjson.DecodeObject).
var (
	askKeys      = []string{"toolCall", "options"}
	toolCallKeys = []string{"toolCallId", "kind", "title", "rawInput"}
	rawInputKeys = []string{"command", "cmd"}
	optionKeys   = []string{"optionId", "kind"}
)

// parseAsk decodes ACP session/request_permission params strictly
// (strict.go): case-sensitive keys, no member twice, toolCall an object
// whose toolCallId, kind and title are strings when present and whose
// rawInput (when an object) has no command/cmd twice, options an array
// of objects each with a string optionId — none twice — and a string
// kind. why is "" for a well-formed ask, else what makes it malformed
// (docs/protocol.md §20); a kind outside ACP's ToolKinds is judged as
// missing (inferred from the title).
func parseAsk(params json.RawMessage) (pa parsedAsk, why string) {
	p, why := strictjson.DecodeObject(params, askKeys...)
	if why != "" {
		return pa, "params: " + why
	}
	tc, ok := p["toolCall"]
	if !ok {
		return pa, "no toolCall"
	}
	if id, ok := jsonl.TopString(tc, "toolCallId"); ok {
		pa.head.ToolCallID = string(id) // for the audit of a malformed ask too
	}
	head, why := strictjson.DecodeObject(tc, toolCallKeys...)
	if why != "" {
		return pa, "toolCall: " + why
	}
	for _, k := range []string{"toolCallId", "kind", "title"} {
		v, _, ok := head.Str(k)
		if !ok {
			return pa, "toolCall." + k + " is not a string"
		}
		switch k {
		case "toolCallId":
			pa.head.ToolCallID = v
		case "kind":
			pa.head.Kind = v
		default:
			pa.head.Title = v
		}
	}
	if ri, ok := head["rawInput"]; ok && len(ri) > 0 && ri[0] == '{' {
		in, why := strictjson.DecodeObject(ri, rawInputKeys...)
		if why != "" {
			return pa, "toolCall.rawInput: " + why
		}
		pa.head.RawInput = map[string]json.RawMessage(in)
	}
	rawOpts, ok := p["options"]
	if !ok || len(rawOpts) == 0 || rawOpts[0] != '[' {
		return pa, "options is not an array"
	}
	var elems []json.RawMessage
	if json.Unmarshal(rawOpts, &elems) != nil {
		return pa, "options is not an array"
	}
	seen := map[string]bool{}
	for i, el := range elems {
		o, why := strictjson.DecodeObject(el, optionKeys...)
		if why != "" {
			return pa, "options[" + itoa(i) + "]: " + why
		}
		id, present, ok := o.Str("optionId")
		if !ok || !present {
			return pa, "options[" + itoa(i) + "].optionId is not a string"
		}
		kind, _, ok := o.Str("kind")
		if !ok {
			return pa, "options[" + itoa(i) + "].kind is not a string"
		}
		if seen[id] {
			return pa, "optionId " + quoteShort(id) + " occurs twice"
		}
		seen[id] = true
		pa.opts = append(pa.opts, permOption{OptionID: id, Kind: kind})
	}
	pa.toolCall, pa.options = jsonl.CleanRaw(tc), jsonl.CleanRaw(rawOpts)
	return pa, ""
}

// onPermission answers an ACP session/request_permission on the actor.
func (s *session) onPermission(ask *permissionAsk) {
	parsed, why := parseAsk(ask.params)
	if ask.malformed != "" {
		why = ask.malformed
	}
	if why != "" {
		// Refused, not judged: the policy cannot know what the agent
		// meant, and a host might read it otherwise (docs/protocol.md §20).
		pa := &pendingAsk{toolCallID: parsed.head.ToolCallID, kind: "other"}
		s.log.Warn("malformed permission request answered cancelled", zap.String("reason", why))
		s.answerPermissionAs(ask, pa, "", "malformed: "+why, protocol.DecisionMalformed)
		return
	}
	head, opts := parsed.head, parsed.opts
	if !protocol.ToolKinds[head.Kind] {
		// ACP's toolCall here updates the call the agent announced: a
		// kind it left out is the one it reported there.
		if k := s.turns.toolKinds[head.ToolCallID]; k != "" {
			head.Kind = k
		}
	}
	kind := policyKind(head)
	pa := &pendingAsk{toolCallID: head.ToolCallID, kind: kind, options: opts, size: len(ask.params)}
	t := s.turns.turn
	if t == nil || t.cancelled || !s.state.is(protocol.StateTurn) {
		// The authority belongs to a live turn (docs/rules.md#r27).
		pa.rule = "no active turn"
		s.answerPermission(ask, pa, nil, "", "no active turn")
		return
	}
	action, rule := decide(s.open, kind)
	pa.rule = rule
	switch action {
	case "approve":
		s.answerPermission(ask, pa, &struct{}{}, pickOption(opts, "allow_once", "allow_always"), rule)
	case "deny":
		s.answerPermission(ask, pa, nil, pickOption(opts, "reject_once", "reject_always"), rule)
	default:
		s.escalate(t, ask, pa, parsed)
	}
}

// answerPermission answers the agent once: optionID "" sends the
// cancelled outcome. approved non-nil marks an approval in the
// audit notice.
func (s *session) answerPermission(ask *permissionAsk, pa *pendingAsk, approved *struct{}, optionID, rule string) {
	decision := protocol.DecisionDenied
	if approved != nil {
		decision = protocol.DecisionApproved
	}
	s.answerPermissionAs(ask, pa, optionID, rule, decision)
}

// decisionTimeout is the audit decision of an escalation decided by
// permissionTimeoutMs (docs/protocol.md §18.3).
const decisionTimeout = protocol.DecisionTimeout

// answerPermissionAs answers the agent once and audits decision; an
// optionID "" sends the cancelled outcome (audited DecisionCancelled,
// except a timeout, malformed or overflow decision, which stays itself).
func (s *session) answerPermissionAs(ask *permissionAsk, pa *pendingAsk, optionID, rule string, decision protocol.Decision) {
	s.settled(ask.id)
	if t := s.turns.turn; t != nil {
		if _, ok := t.pending[ask]; ok {
			delete(t.pending, ask)
			t.pendingBytes -= pa.size
		}
	}
	optionKind := ""
	if optionID == "" {
		ask.answer(acp.NewRequestPermissionOutcomeCancelled())
		switch decision {
		case decisionTimeout, protocol.DecisionMalformed, protocol.DecisionOverflow:
		default:
			decision = protocol.DecisionCancelled
		}
		optionID = ""
	} else {
		optionKind = pickKind(pa.options, optionID)
		ask.answer(acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(optionID)))
	}
	var rid *string
	if s.turns.turn != nil {
		r := s.turns.turn.requestID
		rid = &r
	}
	s.notify(protocol.NotifySessionPermission, protocol.PermissionNotice{Session: s.id, RequestID: rid,
		ToolCallID: pa.toolCallID, Kind: pa.kind, Decision: decision, Rule: rule, OptionID: optionID, OptionKind: optionKind})
}

// escalate sends the ask to the host when it declared permissionRequests,
// else applies nonInteractivePermissions (docs/protocol.md §10). An ask
// beyond the turn's bounds on asks waiting for the host (count and params
// bytes, docs/protocol.md §20) is decided as nonInteractivePermissions
// says too, audited with decision "overflow".
func (s *session) escalate(t *turn, ask *permissionAsk, pa *pendingAsk, parsed parsedAsk) {
	if !s.m.host.PermissionRequests() {
		if s.open.NonInteractivePermissions == "fail" {
			t.failErr = permissionRequiredError(pa.kind, "the host cannot answer")
			s.answerPermission(ask, pa, nil, "", pa.rule+"; nonInteractivePermissions:fail")
			s.cancelTurn(&t.requestID, "permission approval required")
			return
		}
		s.answerPermission(ask, pa, nil, pickOption(pa.options, "reject_once", "reject_always"), pa.rule+"; nonInteractivePermissions:deny")
		return
	}
	if maxN, maxB := s.m.maxPendingAsks(); len(t.pending) >= maxN || t.pendingBytes+pa.size > maxB {
		s.decideOverflow(t, ask, pa, maxN, maxB)
		return
	}
	t.pending[ask] = pa
	t.pendingBytes += pa.size
	rid := t.requestID
	s.notify(protocol.NotifySessionPermission, protocol.PermissionNotice{Session: s.id, RequestID: &rid,
		ToolCallID: pa.toolCallID, Kind: pa.kind, Decision: protocol.DecisionEscalated, Rule: pa.rule})
	params := protocol.PermissionRequestParams{Session: s.id, RequestID: &rid, ToolCall: parsed.toolCall, Options: parsed.options,
		Kind: pa.kind, Rule: pa.rule}
	s.journalRequest(protocol.RequestPermission, params)
	ectx, cancel := context.WithCancelCause(t.ctx)
	bound := s.boundEscalation(t, ask, pa, func() { cancel(nil) })
	s.awaitWithdrawal(ask.id, func() { s.withdrawPermission(t, ask, pa, cancel) })
	go func() {
		res, err := s.askHost(ectx, params)
		bound.Stop()
		cancel(nil)
		s.post(func() {
			if s.turns.turn != t || t.pending[ask] == nil {
				return // the turn ended (or permissionTimeoutMs decided) first: the late answer changes nothing
			}
			optionID := ""
			if err == nil && res.Outcome == protocol.AskSelected {
				for _, o := range pa.options {
					if o.OptionID == res.OptionID {
						optionID = o.OptionID
					}
				}
			}
			var approved *struct{}
			if strings.HasPrefix(pickKind(pa.options, optionID), "allow") {
				approved = &struct{}{}
			}
			s.answerPermission(ask, pa, approved, optionID, "host")
		})
	}()
}

// maxRefusedAnswers is how many times a host's answer to one ask may be
// refused (not the flat shape nor ACP's, docs/protocol.md §9) before the
// ask is answered cancelled; each refusal sends the ask again, carrying
// the refusal in answerRefused. permissionTimeoutMs and the turn bound it
// too.
const maxRefusedAnswers = 3

// askHost sends one escalation to the host, off the actor, and asks again
// (a new request, answerRefused set) while the host's answer is refused
// -32602, at most maxRefusedAnswers times; the last refusal is returned.
// Each request sent is journaled, as the first was (escalate).
func (s *session) askHost(ctx context.Context, params protocol.PermissionRequestParams) (protocol.PermissionRequestResult, error) {
	for refused := 0; ; refused++ {
		res, err := s.m.host.RequestPermission(ctx, params)
		var pe *protocol.Error
		if err == nil || !errors.As(err, &pe) || pe.RPCCode != protocol.CodeInvalidParams || ctx.Err() != nil || refused >= maxRefusedAnswers {
			return res, err
		}
		s.log.Warn("the host's permission answer was refused; asking again", zap.String("field", pe.Data.Field))
		params.AnswerRefused = &protocol.ErrorObject{Code: pe.RPCCode, Message: pe.Message, Data: pe.Data}
		again := params
		if !s.post(func() { s.journalRequest(protocol.RequestPermission, again) }) {
			return res, err
		}
	}
}

// permissionRequiredError is the turn error of an escalation nobody
// approved (nonInteractivePermissions "fail").
func permissionRequiredError(kind, why string) *protocol.TurnError {
	return &protocol.TurnError{Code: protocol.ErrPermissionRequired,
		Message: "a permission of kind " + kind + " needs approval and " + why}
}

func pickKind(opts []permOption, id string) string {
	for _, o := range opts {
		if o.OptionID == id {
			return o.Kind
		}
	}
	return ""
}
