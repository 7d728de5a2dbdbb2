package protocol

// TurnStatus is PromptResult.Status (docs/protocol.md §8 session/prompt).
type TurnStatus string

// Turn statuses.
const (
	// TurnCompleted: the agent ended the turn (any stop reason but
	// "cancelled").
	TurnCompleted TurnStatus = "completed"
	// TurnCancelled: the host (or a close, shutdown) cancelled it, or the
	// agent stopped with "cancelled".
	TurnCancelled TurnStatus = "cancelled"
	// TurnFailed: the turn failed; PromptResult.Error says why.
	TurnFailed TurnStatus = "failed"
)

// StopCancelled is the ACP stop reason of a cancelled turn
// (PromptResult.StopReason), also set when the sidecar ends a turn
// itself.
const StopCancelled = "cancelled"

// PermissionAction is what a permission policy does with an ask
// (docs/protocol.md §9): PermissionPolicy.DefaultAction, and the policy's
// verdict before an option is picked (internal/policy.Decide).
type PermissionAction string

// Permission actions.
const (
	// ActionApprove answers the agent with an allow option.
	ActionApprove PermissionAction = "approve"
	// ActionDeny answers the agent with a reject option.
	ActionDeny PermissionAction = "deny"
	// ActionEscalate asks the host (session/requestPermission).
	ActionEscalate PermissionAction = "escalate"
)

// Decision is PermissionNotice.Decision, the audited outcome of one
// permission ask (docs/protocol.md §9 session/permission).
type Decision string

// Permission decisions; DecisionTimeout, DecisionMalformed and
// DecisionOverflow are the bounds' (limits.go, hardening.go).
const (
	// DecisionApproved: an allow option was chosen.
	DecisionApproved Decision = "approved"
	// DecisionDenied: a reject option was chosen.
	DecisionDenied Decision = "denied"
	// DecisionEscalated: the ask went to the host (session/requestPermission).
	DecisionEscalated Decision = "escalated"
	// DecisionCancelled: the agent was answered cancelled.
	DecisionCancelled Decision = "cancelled"
)

// CostBasis is Cost.Basis (docs/rules.md#r30).
type CostBasis string

// Cost bases.
const (
	// CostTurn: the cost of one turn (a prompt result's).
	CostTurn CostBasis = "turn"
	// CostSessionCumulative: the session's cost so far (session/status).
	CostSessionCumulative CostBasis = "session-cumulative"
)

// During is ExitedNotice.During: what the session was doing when its
// provider died (docs/protocol.md §9 session/exited).
type During string

// Values of During.
const (
	// DuringIdle: no turn was running.
	DuringIdle During = "idle"
	// DuringTurn: a turn was running (or had been lost to the exit).
	DuringTurn During = "turn"
)

// AskOutcome is PermissionRequestResult.Outcome: the host's answer to a
// session/requestPermission (docs/protocol.md §9). Anything else, or an
// AskSelected whose optionId the agent did not offer, counts as cancelled.
type AskOutcome string

// Values of AskOutcome.
const (
	// AskSelected: the host chose the option PermissionRequestResult.OptionID.
	AskSelected AskOutcome = "selected"
	// AskCancelled: the host refused to choose; the agent is answered
	// cancelled.
	AskCancelled AskOutcome = "cancelled"
)
