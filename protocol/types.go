package protocol

import (
	"encoding/json"
)

// Version is the host protocol version this sidecar speaks (docs/protocol.md
// §7 initialize).
const Version = 1

// Method names of the host protocol (docs/protocol.md §7, §8, §9).
const (
	MethodInitialize        = "initialize"
	MethodShutdown          = "shutdown"
	MethodExit              = "exit"
	MethodCancelRequest     = "$/cancelRequest"
	MethodSessionOpen       = "session/open"
	MethodSessionPrompt     = "session/prompt"
	MethodSessionCancel     = "session/cancel"
	MethodSessionStatus     = "session/status"
	MethodSessionClose      = "session/close"
	MethodSessionList       = "session/list"
	MethodSessionSetModel   = "session/setModel"
	MethodSessionSetMode    = "session/setMode"
	MethodSessionSetConfig  = "session/setConfigOption"
	NotifySessionUpdate     = "session/update"
	NotifySessionExited     = "session/exited"
	NotifySessionPermission = "session/permission"
	NotifyCleanupProof      = "cleanup/proof"
	RequestPermission       = "session/requestPermission"
)

// Not shared: the wire structs below (and open.go's, lifecycle.go's, ext.go's) only look alike; each is its own message.

// PromptParams are the params of `session/prompt`. Prompt is a string or
// an ACP ContentBlock[] (kept raw, forwarded verbatim).
type PromptParams struct {
	// Session is the sidecar session id; required.
	Session string `json:"session"`
	// RequestID is the host's id for the turn: 1-256 bytes of valid UTF-8
	// without NUL or U+FFFD, unique across every session of the key's
	// record (else DUPLICATE_REQUEST_ID).
	RequestID string `json:"requestId"`
	// Prompt is a non-empty string (sent as one text block) or a
	// non-empty ContentBlock[] whose blocks each have a non-empty type.
	Prompt json.RawMessage `json:"prompt"`
	// TimeoutMs bounds the turn (ms, 1-86400000; a queued turn's from
	// when it starts): past it the turn is cancelled and fails
	// TURN_TIMEOUT. Nil: no bound.
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
	// Queue: wait behind the active turn instead of TURN_ACTIVE
	// (docs/protocol.md §8 session/prompt, Queued turns).
	Queue bool `json:"queue,omitempty"`
	// Meta is merged into the ACP session/prompt `_meta`
	// (docs/protocol.md §23).
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// Usage is token usage in the host protocol's camelCase.
type Usage struct {
	// InputTokens are the input tokens.
	InputTokens int64 `json:"inputTokens"`
	// OutputTokens are the output tokens.
	OutputTokens int64 `json:"outputTokens"`
	// TotalTokens is the total token count.
	TotalTokens int64 `json:"totalTokens"`
	// CachedReadTokens are input tokens read from a cache; omitted when
	// the agent reported none (and never summed into cumulative usage).
	CachedReadTokens *int64 `json:"cachedReadTokens,omitempty"`
	// CachedWriteTokens are tokens written to a cache; omitted likewise.
	CachedWriteTokens *int64 `json:"cachedWriteTokens,omitempty"`
	// ThoughtTokens are reasoning tokens; omitted likewise.
	ThoughtTokens *int64 `json:"thoughtTokens,omitempty"`
}

// Cost is a money amount with its basis: "turn" in a prompt result,
// "session-cumulative" in status (docs/rules.md#r30).
type Cost struct {
	// Amount is in units of Currency (not minor units).
	Amount float64 `json:"amount"`
	// Currency is the currency code the agent reported, e.g. "USD".
	Currency string `json:"currency"`
	// Basis says what Amount covers: CostTurn or CostSessionCumulative.
	Basis CostBasis `json:"basis"`
}

// TurnError is the error of a failed turn.
type TurnError struct {
	// Code is the failure's stable code, e.g. PROVIDER_PROCESS_LOST or
	// TURN_TIMEOUT.
	Code DataCode `json:"code"`
	// Message is the failure's text for people (secret-free).
	Message string `json:"message"`
	// Retryable: the same prompt may succeed later unchanged.
	Retryable bool `json:"retryable"`
}

// PromptResult is the result of `session/prompt`. Status is "completed",
// "cancelled" or "failed"; StopReason is the ACP stop reason.
type PromptResult struct {
	// RequestID is the prompt's requestId, echoed.
	RequestID string `json:"requestId"`
	// Status is how the turn ended.
	Status TurnStatus `json:"status"`
	// StopReason is the ACP stop reason ("end_turn", "cancelled", …);
	// omitted when unknown.
	StopReason string `json:"stopReason,omitempty"`
	// Usage is the turn's token usage as the agent reported it (in its
	// session/prompt answer, or a profile's usage receipt; failed turns
	// included); nil when it gave none or the sidecar ended the turn.
	Usage *Usage `json:"usage,omitempty"`
	// Cost is the turn's cost (basis "turn"): how much the agent's
	// cumulative cost grew during it; nil when the turn reported none.
	Cost *Cost `json:"cost,omitempty"`
	// Error says why, when Status is "failed"; nil otherwise.
	Error *TurnError `json:"error,omitempty"`
}

// SessionRef are params naming one session (status).
type SessionRef struct {
	// Session is the sidecar session id; required.
	Session string `json:"session"`
}

// CancelParams are the params of `session/cancel`.
type CancelParams struct {
	// Session is the sidecar session id; required.
	Session string `json:"session"`
	// RequestID names the turn to cancel, queued or active (only if it
	// matches); nil: the active turn, leaving the queued ones queued.
	RequestID *string `json:"requestId,omitempty"`
}

// CloseParams are the params of `session/close`.
type CloseParams struct {
	// Session is the sidecar session id; required.
	Session string `json:"session"`
	// Reason is copied into the proof; Validate fills in "host close"
	// when empty.
	Reason string `json:"reason"`
	// DiscardPersistentState deletes the key's record and journal (and
	// the key's private HOME and state-store objects, where there are
	// any) instead of marking the record closed; false keeps them.
	DiscardPersistentState bool `json:"discardPersistentState,omitempty"`
}

// StrictMembers reports that session/close params are read strictly too:
// a misspelt discardPersistentState must not silently keep the key's
// record and private HOME (found by a fresh-user trial; the schema's
// CloseParams has additionalProperties false).
func (*CloseParams) StrictMembers() bool { return true }

// SetModelParams are the params of `session/setModel`.
type SetModelParams struct {
	// Session is the sidecar session id; required.
	Session string `json:"session"`
	// Model is the model id to select (MODEL_UNAVAILABLE unless the
	// agent offers it); required.
	Model string `json:"model"`
}

// SetModeParams are the params of `session/setMode`.
type SetModeParams struct {
	// Session is the sidecar session id; required.
	Session string `json:"session"`
	// Mode is the mode id to set (MODE_UNAVAILABLE unless the agent
	// offers it); required.
	Mode string `json:"mode"`
}

// SetConfigOptionParams are the params of `session/setConfigOption`.
type SetConfigOptionParams struct {
	// Session is the sidecar session id; required.
	Session string `json:"session"`
	// Key is the ACP config option's id; required (UNSUPPORTED_CONTROL
	// when the agent has no such option).
	Key string `json:"key"`
	// Value is a string (a value id) or a boolean; any other JSON type,
	// null included, is -32602 field "value".
	Value json.RawMessage `json:"value"`
}

// UsageStatus is usage in `session/status`: cumulative and per request id.
type UsageStatus struct {
	// Cumulative sums the input, output and total tokens of every turn,
	// earlier sessions of the key's record included.
	Cumulative Usage `json:"cumulative"`
	// PerRequest is each turn's usage by requestId ({} when none).
	PerRequest map[string]Usage `json:"perRequest"`
	// Context is the last ACP usage_update's used/size (omitted before
	// the agent sent one).
	Context *ContextUsage `json:"context,omitempty"`
}

// ProcessStatus is the provider's liveness in `session/status`.
type ProcessStatus struct {
	// Pid is the provider leader's pid.
	Pid int `json:"pid"`
	// Alive: the provider leader has not exited (false while parked).
	Alive bool `json:"alive"`
}

// StatusResult is the result of `session/status` (docs/rules.md#r23).
type StatusResult struct {
	// Session is the sidecar session id.
	Session string `json:"session"`
	// SessionKey is the session's key.
	SessionKey string `json:"sessionKey"`
	// Agent is the profile name given at open.
	Agent string `json:"agent"`
	// State is the session's state (docs/protocol.md §6).
	State SessionState `json:"state"`
	// Identity is the identity admitted at open.
	Identity Identity `json:"identity"`
	// Closed is the record's closed flag (with no record kept, whether
	// the session is closed).
	Closed bool `json:"closed"`
	// LastRequestID is the requestId of the last turn started (the
	// running one during a turn), from the record; null before any.
	LastRequestID *string `json:"lastRequestId"`
	// Models is the current model state (the record's where it names
	// one); nil when the agent reports none.
	Models *Models `json:"models,omitempty"`
	// Modes is the current mode state, likewise.
	Modes *Modes `json:"modes,omitempty"`
	// ConfigOptions are the agent's current ACP config options, as the
	// sidecar tracks them in memory; omitted when there are none.
	ConfigOptions []json.RawMessage `json:"configOptions,omitempty"`
	// Usage is the session's token usage (the record's).
	Usage UsageStatus `json:"usage"`
	// Cost is the last cumulative cost the agent reported (basis
	// "session-cumulative"); nil when it never reported one.
	Cost *Cost `json:"cost,omitempty"`
	// Process is the provider leader's pid and liveness.
	Process ProcessStatus `json:"process"`
	// Summary is one line: "session=<sessionKey> backendSessionId=<id>
	// agentSessionId=<id> <state>".
	Summary string `json:"summary"`
	// PermissionBinding is the open's, updated by mode changes since.
	PermissionBinding PermissionBinding `json:"permissionBinding"`
	// QueuedRequestIDs are the queued turns waiting behind the active one,
	// in the order they will run (docs/protocol.md §8, Queued turns).
	QueuedRequestIDs []string `json:"queuedRequestIds"`
	// Resources: the provider cgroup's usage and limits (docs/protocol.md
	// §18.2); nil outside cgroup containment.
	Resources *Resources `json:"resources,omitempty"`
	// FromSnapshot: the session's actor was busy past the state-read
	// bound, so this answer is its last snapshot (state, identity, turn,
	// usage as of then), checked against the record like any other
	// (docs/protocol.md §19).
	FromSnapshot bool `json:"fromSnapshot,omitempty"`
	// Persistence: whether the journal and the record are being written
	// (docs/protocol.md §16).
	Persistence *Persistence `json:"persistence,omitempty"`
	// Lifecycle: the mode, the tree's state and its retires and revives
	// (docs/protocol.md §24).
	Lifecycle *LifecycleStatus `json:"lifecycle,omitempty"`
	// Store: the key's head in the state store as this session last saw
	// it; nil without --state-store (docs/protocol.md §24).
	Store *StoreStatus `json:"store,omitempty"`
	// Network: the tree's connections through its allow list so far
	// (docs/protocol.md §19.1); nil without sandbox.network.allow.
	Network *NetworkTotals `json:"network,omitempty"`
}

// ListEntry is one session in `session/list`.
type ListEntry struct {
	// Session is the sidecar session id.
	Session string `json:"session"`
	// SessionKey is the session's key.
	SessionKey string `json:"sessionKey"`
	// Agent is the profile name given at open.
	Agent string `json:"agent"`
	// State is the session's state as of its last state change.
	State SessionState `json:"state"`
	// Identity is the admitted identity; nil while admitting.
	Identity *Identity `json:"identity,omitempty"`
	// ActiveRequestID is the running turn's requestId; nil outside a turn.
	ActiveRequestID *string `json:"activeRequestId,omitempty"`
}

// SessionUpdateNotice is the `session/update` notification. Update is the
// ACP SessionUpdate verbatim; Seq starts at 1 per session with no gaps;
// RequestID is nil outside a turn (docs/protocol.md §9 session/update).
type SessionUpdateNotice struct {
	// Session is the sidecar session id.
	Session string `json:"session"`
	// RequestID is the active turn's id (a late tool_call_update carries
	// its tool call's turn); null outside a turn.
	RequestID *string `json:"requestId"`
	// Seq numbers the session's updates from 1, with no gaps.
	Seq uint64 `json:"seq"`
	// Update is the agent's ACP SessionUpdate object, verbatim
	// (docs/protocol.md §9).
	Update json.RawMessage `json:"update"`
}

// ExitedNotice is the `session/exited` notification: the provider died on
// its own, closed its stdin, or the session was fenced off in the state
// store. During is "idle" or "turn".
type ExitedNotice struct {
	// Session is the sidecar session id.
	Session string `json:"session"`
	// SessionKey is the session's key.
	SessionKey string `json:"sessionKey"`
	// Pid is the provider leader's pid.
	Pid int `json:"pid"`
	// ExitCode is the leader's exit status after a normal exit; nil
	// otherwise.
	ExitCode *int `json:"exitCode,omitempty"`
	// Signal names the signal that killed the leader (e.g. "SIGKILL");
	// empty otherwise.
	Signal string `json:"signal,omitempty"`
	// During says whether a turn was running: "idle" or "turn".
	During During `json:"during"`
	// Reason is "exit", "signal" or "oom" (docs/protocol.md §18.2),
	// ExitStdinClosed or ExitFenced (§24).
	Reason string `json:"reason"`
}

// PermissionNotice is the `session/permission` audit notification.
// Decision is "approved", "denied", "escalated", "cancelled", "timeout"
// (DecisionTimeout), "malformed" (DecisionMalformed), "overflow"
// (DecisionOverflow) or "withdrawn" (DecisionWithdrawn). OptionKind is
// the ACP kind of the option chosen (the one OptionID names), so an audit
// never infers it.
type PermissionNotice struct {
	// Session is the sidecar session id.
	Session string `json:"session"`
	// RequestID is the turn the ask belonged to; null only for an ask
	// that arrived when no turn existed.
	RequestID *string `json:"requestId"`
	// ToolCallID is the ACP toolCallId of the ask.
	ToolCallID string `json:"toolCallId"`
	// Kind is the ToolKind the policy judged (docs/protocol.md §10).
	Kind string `json:"kind"`
	// Decision is the outcome of the ask.
	Decision Decision `json:"decision"`
	// Rule names what decided, e.g. a policy rule (docs/protocol.md §10),
	// "host", a rule with a "; nonInteractivePermissions:deny" suffix, or
	// "turn cancelled" (the full list: docs/protocol.md §9).
	Rule string `json:"rule"`
	// OptionID is the option chosen for the agent; omitted when none was
	// (e.g. escalated, malformed, cancelled, withdrawn).
	OptionID string `json:"optionId,omitempty"`
	// OptionKind is that option's own ACP kind (e.g. "allow_once").
	OptionKind string `json:"optionKind,omitempty"`
}

// PermissionRequestParams are the params of the sidecar → host request
// `session/requestPermission`; ToolCall and Options are ACP verbatim.
type PermissionRequestParams struct {
	// Session is the sidecar session id.
	Session string `json:"session"`
	// RequestID is the id of the turn the ask belongs to.
	RequestID *string `json:"requestId"`
	// ToolCall is the agent's ACP toolCall.
	ToolCall json.RawMessage `json:"toolCall"`
	// Options are the agent's ACP permission options; the host answers
	// with one of their optionIds.
	Options json.RawMessage `json:"options"`
	// Kind is the ToolKind the policy used.
	Kind string `json:"kind"`
	// Rule names the rule that escalated (docs/protocol.md §10).
	Rule string `json:"rule"`
	// AnswerRefused is set on a request sent again because the host's
	// answer to the one before was refused: the -32602 error that answer
	// got (data.field names the member at fault). The ask stays pending
	// meanwhile (docs/protocol.md §9).
	AnswerRefused *ErrorObject `json:"answerRefused,omitempty"`
}

// ErrorObject is a JSON-RPC error object {code, message, data} as it
// travels inside another message.
type ErrorObject struct {
	// Code is the JSON-RPC numeric error code.
	Code int `json:"code"`
	// Message is the error text for people.
	Message string `json:"message"`
	// Data is the error's data member.
	Data ErrorData `json:"data"`
}

// PermissionRequestResult is the host's answer: Outcome AskSelected with
// OptionID, or AskCancelled.
type PermissionRequestResult struct {
	// Outcome is AskSelected or AskCancelled.
	Outcome AskOutcome `json:"outcome"`
	// OptionID is the chosen option's optionId, with AskSelected only.
	OptionID string `json:"optionId,omitempty"`
}

// ProofNotice is the `cleanup/proof` notification.
type ProofNotice struct {
	// Proof is the finished cleanup's proof.
	Proof *Proof `json:"proof"`
}

// CloseResult is the result of `session/close`.
type CloseResult struct {
	// Proof is the session's complete cleanup proof (the same one for
	// every close of the session).
	Proof *Proof `json:"proof"`
}

// ShutdownResult is the result of `shutdown`.
type ShutdownResult struct {
	// Proofs are the final proofs of the sessions not already closed and
	// proven before the shutdown (opens it aborted included), oldest
	// session first ([] when none).
	Proofs []*Proof `json:"proofs"`
}
