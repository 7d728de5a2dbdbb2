// Package policy holds the permission and elicitation policy as pure
// decisions: an agent's ask (ACP session/request_permission params) and a
// session's policy (protocol.OpenParams) in, a decision and the rule that
// made it out (docs/protocol.md §10); an agent's elicitation/create params
// in, the request or why it is malformed out, and the host's answer
// checked against the requested schema (docs/protocol.md §22). Agent
// params are decoded strictly (internal/strictjson, docs/protocol.md §20).
//
// Nothing here holds a process, a store, a host or a clock: internal/
// session's actor asks the host, keeps the pending asks, audits
// and answers the agent, and calls this package for every decision.
package policy

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The actions of a permission decision (Decide): approve the ask with an
// allow option, deny it with a reject option, or escalate it to the host
// (docs/protocol.md §10); protocol's PermissionAction values.
const (
	Approve  = protocol.ActionApprove
	Deny     = protocol.ActionDeny
	Escalate = protocol.ActionEscalate
)

// Option is one of the options an ACP permission request offers: its
// optionId and its ACP PermissionOptionKind (allow_once, allow_always,
// reject_once, reject_always).
type Option struct {
	// OptionID is ACP optionId, what an approval or denial selects.
	OptionID string `json:"optionId"`
	// Kind is ACP kind, a PermissionOptionKind.
	Kind string `json:"kind"`
}

// ToolCallHead is the part of an ACP permission request's toolCall the
// policy reads: the id, the agent's ToolKind (may be empty or unknown),
// the title, and rawInput's members (only "command" and "cmd" are looked
// at).
type ToolCallHead struct {
	// ToolCallID is ACP toolCallId ("" when absent).
	ToolCallID string `json:"toolCallId"`
	// Kind is ACP kind, the agent's ToolKind as sent ("" when absent).
	Kind string `json:"kind"`
	// Title is ACP title ("" when absent).
	Title string `json:"title"`
	// RawInput is ACP rawInput's members, raw JSON by key; nil when
	// rawInput is absent or not an object.
	RawInput map[string]json.RawMessage `json:"rawInput"`
}

// Kind is the ToolKind the policy judges a permission request by:
// the agent's kind, inferred from the title when missing, except that a
// tool call carrying a shell command (rawInput "command" or "cmd") is
// always "execute". An agent's label says what the command looks like,
// not what it does: codex-acp 0.16 labels `find . -delete` "search" and
// `cat a | tee b` "read" (docs/agents.md), which approve-reads would
// approve. The result is always one of protocol.ToolKinds.
func Kind(head ToolCallHead) string {
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

// AskKind is the ToolKind a permission ask is judged by (Kind), where
// announced is the kind the agent reported for the same tool call in its
// session/update tool_call ("" if none): ACP's toolCall in
// session/request_permission updates the call the agent announced, so a
// kind the ask leaves out (or gives outside protocol.ToolKinds) is the
// announced one (docs/protocol.md §10).
func AskKind(head ToolCallHead, announced string) string {
	if !protocol.ToolKinds[head.Kind] && announced != "" {
		head.Kind = announced
	}
	return Kind(head)
}

// OverflowRule is the audited rule of an ask decided without the host
// because maxN asks or maxB bytes of asks already wait for it
// (Overflows; docs/protocol.md §20).
func OverflowRule(maxN, maxB int) string {
	return "more than " + strconv.Itoa(maxN) + " asks or " + strconv.Itoa(maxB) +
		" bytes waiting for the host (--max-pending-asks, --max-pending-ask-bytes)"
}

// readKinds are the ToolKinds approve-reads approves.
var readKinds = map[string]bool{"read": true, "search": true, "think": true}

// inferKind guesses a ToolKind from a tool call title when the agent sent
// none (docs/protocol.md §10: "inferred from the title when missing"):
// the first of read, delete, move, edit, search, fetch, execute whose
// words the lower-cased title holds, else "other".
func inferKind(title string) string {
	t := strings.ToLower(title)
	switch {
	case containsAny(t, "read", "view", "cat "):
		return "read"
	case containsAny(t, "delete", "remove") || strings.HasPrefix(t, "rm "):
		return "delete"
	case containsAny(t, "move", "rename"):
		return "move"
	case containsAny(t, "edit", "write", "patch"):
		return "edit"
	case containsAny(t, "search", "grep", "find"):
		return "search"
	case containsAny(t, "fetch", "http"):
		return "fetch"
	case containsAny(t, "run", "exec", "command", "shell"):
		return "execute"
	}
	return "other"
}

// containsAny reports whether s holds any of words (inferKind's test of
// a title against one kind's words).
func containsAny(s string, words ...string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// Decide applies p's permissionPolicy then its permissionMode to an ask
// of ToolKind kind (docs/protocol.md §10): autoDeny, autoApprove,
// escalate, defaultAction, then approve-all, deny-all or (any other mode)
// approve-reads. It returns Approve, Deny or Escalate — or a
// defaultAction as given — and the rule that decided, e.g.
// "permissionPolicy.autoDeny" or "permissionMode:approve-reads".
func Decide(p protocol.OpenParams, kind string) (action protocol.PermissionAction, rule string) {
	if pp := p.PermissionPolicy; pp != nil {
		for _, r := range []struct {
			list   []string
			action protocol.PermissionAction
			rule   string
		}{{pp.AutoDeny, Deny, "permissionPolicy.autoDeny"}, {pp.AutoApprove, Approve, "permissionPolicy.autoApprove"},
			{pp.Escalate, Escalate, "permissionPolicy.escalate"}} {
			if slices.Contains(r.list, kind) {
				return r.action, r.rule
			}
		}
		if pp.DefaultAction != "" {
			return pp.DefaultAction, "permissionPolicy.defaultAction"
		}
	}
	switch p.PermissionMode {
	case "approve-all":
		return Approve, "permissionMode:approve-all"
	case "deny-all":
		return Deny, "permissionMode:deny-all"
	default:
		if readKinds[kind] {
			return Approve, "permissionMode:approve-reads"
		}
		return Escalate, "permissionMode:approve-reads"
	}
}

// PickOption returns the optionId of the first of opts whose kind is
// kinds[0], else kinds[1], …; "" when none has any of them (the agent is
// then answered cancelled).
func PickOption(opts []Option, kinds ...string) string {
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return o.OptionID
			}
		}
	}
	return ""
}

// ApproveOption is the option an approval answers with: allow_once, else
// allow_always; "" when the agent offered neither.
func ApproveOption(opts []Option) string { return PickOption(opts, "allow_once", "allow_always") }

// RejectOption is the option a denial answers with (a Deny decision, and
// nonInteractivePermissions "deny"): reject_once, else reject_always; ""
// when the agent offered neither.
func RejectOption(opts []Option) string { return PickOption(opts, "reject_once", "reject_always") }

// PickKind returns the kind of the option of opts with optionId id, ""
// when there is none.
func PickKind(opts []Option, id string) string {
	for _, o := range opts {
		if o.OptionID == id {
			return o.Kind
		}
	}
	return ""
}

// Unanswered decides an escalation the host will not answer — it cannot
// (no capabilities.permissionRequests), did not within
// permissionTimeoutMs, or the turn has no room for it (Overflows) — as
// p's nonInteractivePermissions says (docs/protocol.md §8 session/open,
// §18.3, §20): fail is true for "fail" (the agent is answered cancelled
// and the turn fails with PermissionRequiredError); otherwise ("deny",
// the default) optionID is RejectOption(opts).
func Unanswered(p protocol.OpenParams, opts []Option) (optionID string, fail bool) {
	if p.NonInteractivePermissions == "fail" {
		return "", true
	}
	return RejectOption(opts), false
}

// HostAnswer decides what the host's answer to an escalation selects
// (docs/protocol.md §9): optionID is the option of opts the host chose
// (res.Outcome AskSelected naming an offered optionId, and no err), else
// "" — the agent is then answered cancelled; approved reports whether
// that option's kind is an allow kind.
func HostAnswer(opts []Option, res protocol.PermissionRequestResult, err error) (optionID string, approved bool) {
	if err == nil && res.Outcome == protocol.AskSelected {
		for _, o := range opts {
			if o.OptionID == res.OptionID {
				optionID = o.OptionID
			}
		}
	}
	return optionID, strings.HasPrefix(PickKind(opts, optionID), "allow")
}

// MaxRefusedAnswers is how many times a host's answer to one ask may be
// refused (not the flat shape nor ACP's, docs/protocol.md §9) before the
// ask is answered cancelled; each refusal sends the ask again, carrying
// the refusal in answerRefused. permissionTimeoutMs and the turn bound it
// too.
const MaxRefusedAnswers = 3

// AskAgain decides whether the host is asked the same escalation again
// after it answered with err, its answer having been refused refused
// times before: it returns the refusal to carry in answerRefused when err
// is a -32602 *protocol.Error and refused < MaxRefusedAnswers, else nil
// (err is then the outcome).
func AskAgain(err error, refused int) *protocol.Error {
	var pe *protocol.Error
	if err == nil || !errors.As(err, &pe) || pe.RPCCode != protocol.CodeInvalidParams || refused >= MaxRefusedAnswers {
		return nil
	}
	return pe
}

// Overflows reports whether an ask of size bytes of ACP params finds no
// room in its turn, where waiting asks of waitingBytes bytes already wait
// for the host: maxN or more wait, or the bytes would pass maxB
// (--max-pending-asks, --max-pending-ask-bytes; docs/protocol.md §20, §22).
func Overflows(waiting, waitingBytes, size, maxN, maxB int) bool {
	return waiting >= maxN || waitingBytes+size > maxB
}

// PermissionRequiredError is the turn error of an escalation nobody
// approved (nonInteractivePermissions "fail"): PERMISSION_APPROVAL_REQUIRED
// naming kind and why.
func PermissionRequiredError(kind, why string) *protocol.TurnError {
	return &protocol.TurnError{Code: protocol.ErrPermissionRequired,
		Message: "a permission of kind " + kind + " needs approval and " + why}
}
