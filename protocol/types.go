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

// Not shared: the wire structs below (and lifecycle.go's, ext.go's) only look alike; each is its own message.

// Command is the only executable launched for a session: an absolute path,
// its args (argv[1:]) and optionally the hex SHA-256 the file must have.
type Command struct {
	Path   string   `json:"path"`
	Args   []string `json:"args,omitempty"`
	Sha256 string   `json:"sha256,omitempty"`
}

// PermissionPolicy are permission rules by ACP ToolKind, evaluated before
// permissionMode. DefaultAction is ActionApprove, ActionDeny or
// ActionEscalate.
type PermissionPolicy struct {
	AutoApprove   []string         `json:"autoApprove,omitempty"`
	AutoDeny      []string         `json:"autoDeny,omitempty"`
	Escalate      []string         `json:"escalate,omitempty"`
	DefaultAction PermissionAction `json:"defaultAction,omitempty"`
}

// StrictMembers reports that session/open params are read strictly: a
// member that is none of OpenParams' (or of its objects': command,
// limits, permissionPolicy, sandbox, lifecycle) is -32602 with data.field
// naming it — a misspelt permisionMode must not silently leave the default
// policy; _meta is the place for anything else (docs/protocol.md §19).
func (*OpenParams) StrictMembers() bool { return true }

// OpenParams are the params of `session/open` (docs/protocol.md §8). Env is
// secret: it must never be logged, persisted or echoed.
type OpenParams struct {
	SessionKey                string            `json:"sessionKey"`
	Agent                     string            `json:"agent"`
	Command                   *Command          `json:"command"`
	Cwd                       string            `json:"cwd"`
	Env                       map[string]string `json:"env,omitempty"`
	StateDir                  string            `json:"stateDir,omitempty"`
	Model                     string            `json:"model,omitempty"`
	Mode                      string            `json:"mode,omitempty"`
	SystemPrompt              string            `json:"systemPrompt,omitempty"`
	PermissionMode            string            `json:"permissionMode,omitempty"`
	PermissionPolicy          *PermissionPolicy `json:"permissionPolicy,omitempty"`
	NonInteractivePermissions string            `json:"nonInteractivePermissions,omitempty"`
	McpServers                []json.RawMessage `json:"mcpServers,omitempty"`
	HandshakeTimeoutMs        *int64            `json:"handshakeTimeoutMs,omitempty"`
	Resume                    *bool             `json:"resume,omitempty"`
	// InheritEnv, Limits and PermissionTimeoutMs: docs/protocol.md §18
	// (protocol/limits.go).
	InheritEnv          []string `json:"inheritEnv,omitempty"`
	Limits              *Limits  `json:"limits,omitempty"`
	PermissionTimeoutMs *int64   `json:"permissionTimeoutMs,omitempty"`
	// ElicitationTimeoutMs bounds one host elicitation (default
	// permissionTimeoutMs; docs/protocol.md §22).
	ElicitationTimeoutMs *int64 `json:"elicitationTimeoutMs,omitempty"`
	// Sandbox: docs/protocol.md §19 (protocol/sandbox.go); nil = the
	// sidecar's default.
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// Meta, AuthMethod, AgentSessionID and AdditionalDirectories:
	// docs/protocol.md §23 (protocol/ext.go). Meta is merged into the ACP
	// session/new|load|resume `_meta` under the sidecar's own keys.
	Meta                  json.RawMessage `json:"_meta,omitempty"`
	AuthMethod            *string         `json:"authMethod,omitempty"`
	AgentSessionID        *string         `json:"agentSessionId,omitempty"`
	AdditionalDirectories []string        `json:"additionalDirectories,omitempty"`
	// Lifecycle, ReviveWaitMs, StateDirs and Publish: docs/protocol.md
	// §24 (protocol/lifecycle.go). Lifecycle nil is warm; ReviveWaitMs
	// (ms) bounds a wait for a live-tree slot (--max-live-trees; default
	// DefaultReviveWaitMs); StateDirs names the provider-state
	// directories to publish, overriding the profile's (name → absolute
	// path); Publish "turn" publishes after every turn too.
	Lifecycle    *Lifecycle        `json:"lifecycle,omitempty"`
	ReviveWaitMs *int64            `json:"reviveWaitMs,omitempty"`
	StateDirs    map[string]string `json:"stateDirs,omitempty"`
	Publish      string            `json:"publish,omitempty"`
	// Effort and Thinking: docs/protocol.md §24, effort and thinking
	// (protocol/seed.go): a value of the agent's effort config option, or
	// of its thinking option (Pi's thought_level), applied and verified
	// before the first prompt; CONTROL_UNAVAILABLE when the agent does not
	// offer it. AllowSlashCommands lets prompts that start with "/" reach
	// an agent whose profile guards them (Copilot).
	Effort             string `json:"effort,omitempty"`
	Thinking           string `json:"thinking,omitempty"`
	AllowSlashCommands bool   `json:"allowSlashCommands,omitempty"`
}

// Identity is the admitted identity of a session (docs/rules.md#r8).
// Go code has one name for each id; the wire names are acpx's.
type Identity struct {
	// SessionKey is the session key (the open's sessionKey), on the wire
	// as acpxRecordId, as acpx names a record by it; on disk it is the
	// record's acpx_record_id (store.Record.SessionKey).
	SessionKey string `json:"acpxRecordId"`
	// BackendSessionID is the ACP sessionId the agent gave at
	// session/new, load or resume; on disk acp_session_id
	// (store.Record.BackendSessionID).
	BackendSessionID string `json:"backendSessionId"`
	// AgentSessionID is the agent's own session id: the open's
	// agentSessionId or a prior record's, else BackendSessionID; on disk
	// agent_session_id.
	AgentSessionID string `json:"agentSessionId"`
}

// AgentInfo describes the agent as its ACP initialize reported it;
// Capabilities is ACP agentCapabilities verbatim.
type AgentInfo struct {
	Name            string          `json:"name"`
	Title           string          `json:"title,omitempty"`
	Version         string          `json:"version"`
	ProtocolVersion int             `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
}

// Models is the model state an agent reports.
type Models struct {
	CurrentModelID    string   `json:"currentModelId"`
	AvailableModelIDs []string `json:"availableModelIds"`
}

// Modes is the mode state an agent reports.
type Modes struct {
	CurrentModeID    string   `json:"currentModeId"`
	AvailableModeIDs []string `json:"availableModeIds"`
}

// ProcessInfo describes a provider process at open.
type ProcessInfo struct {
	Pid         int    `json:"pid"`
	Pgid        int    `json:"pgid"`
	StartedAt   Time   `json:"startedAt"`
	Containment string `json:"containment"`
}

// PermissionBinding says how the sidecar held the agent to the host's
// permission policy at open (docs/agents.md): Bound is true when the agent
// runs in a configuration where every tool use it would otherwise decide
// alone reaches ACP session/request_permission; Mode is the mode it runs
// in ("" when the agent reports none); Via is how: "agent default" (it
// already ran in an asking mode), "session/set_mode" or
// "session/set_config_option" (the sidecar selected Mode), "env
// OPENCODE_PERMISSION" (launch settings), "host mode" (the host named an
// asking mode), or "none"; Autonomous is true when the host named a mode
// in which the agent decides alone (allowed with approve-all only).
type PermissionBinding struct {
	Bound      bool   `json:"bound"`
	Mode       string `json:"mode,omitempty"`
	Via        string `json:"via"`
	Autonomous bool   `json:"autonomous"`
}

// OpenResult is the result of `session/open`.
type OpenResult struct {
	Session       string            `json:"session"`
	SessionKey    string            `json:"sessionKey"`
	Identity      Identity          `json:"identity"`
	Resumed       bool              `json:"resumed"`
	Agent         AgentInfo         `json:"agent"`
	Models        *Models           `json:"models,omitempty"`
	Modes         *Modes            `json:"modes,omitempty"`
	ConfigOptions []json.RawMessage `json:"configOptions"`
	Process       ProcessInfo       `json:"process"`
	// PermissionBinding: how the agent is held to the permission policy.
	PermissionBinding PermissionBinding `json:"permissionBinding"`
	// Sandbox is the kernel sandbox applied (docs/protocol.md §19).
	Sandbox *SandboxResult `json:"sandbox,omitempty"`
	// AuthMethods are the agent's ACP AuthMethod[] verbatim ([] when it
	// offers none; docs/protocol.md §23).
	AuthMethods []json.RawMessage `json:"authMethods"`
	// Restore: the provider state restored from the state store before
	// the launch, when one was (docs/protocol.md §24).
	Restore *Restore `json:"restore,omitempty"`
	// Lifecycle is the session's lifecycle mode (docs/protocol.md §24).
	Lifecycle LifecycleMode `json:"lifecycle"`
}

// PromptParams are the params of `session/prompt`. Prompt is a string or
// an ACP ContentBlock[] (kept raw, forwarded verbatim).
type PromptParams struct {
	Session   string          `json:"session"`
	RequestID string          `json:"requestId"`
	Prompt    json.RawMessage `json:"prompt"`
	TimeoutMs *int64          `json:"timeoutMs,omitempty"`
	// Queue: wait behind the active turn instead of TURN_ACTIVE
	// (docs/protocol.md §8 session/prompt, Queued turns).
	Queue bool `json:"queue,omitempty"`
	// Meta is merged into the ACP session/prompt `_meta`
	// (docs/protocol.md §23).
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// Usage is token usage in the host protocol's camelCase.
type Usage struct {
	InputTokens       int64  `json:"inputTokens"`
	OutputTokens      int64  `json:"outputTokens"`
	TotalTokens       int64  `json:"totalTokens"`
	CachedReadTokens  *int64 `json:"cachedReadTokens,omitempty"`
	CachedWriteTokens *int64 `json:"cachedWriteTokens,omitempty"`
	ThoughtTokens     *int64 `json:"thoughtTokens,omitempty"`
}

// Cost is a money amount with its basis: "turn" in a prompt result,
// "session-cumulative" in status (docs/rules.md#r30).
type Cost struct {
	Amount   float64   `json:"amount"`
	Currency string    `json:"currency"`
	Basis    CostBasis `json:"basis"`
}

// TurnError is the error of a failed turn.
type TurnError struct {
	Code      DataCode `json:"code"`
	Message   string   `json:"message"`
	Retryable bool     `json:"retryable"`
}

// PromptResult is the result of `session/prompt`. Status is "completed",
// "cancelled" or "failed"; StopReason is the ACP stop reason.
type PromptResult struct {
	RequestID  string     `json:"requestId"`
	Status     TurnStatus `json:"status"`
	StopReason string     `json:"stopReason,omitempty"`
	Usage      *Usage     `json:"usage,omitempty"`
	Cost       *Cost      `json:"cost,omitempty"`
	Error      *TurnError `json:"error,omitempty"`
}

// SessionRef are params naming one session (status).
type SessionRef struct {
	Session string `json:"session"`
}

// CancelParams are the params of `session/cancel`.
type CancelParams struct {
	Session   string  `json:"session"`
	RequestID *string `json:"requestId,omitempty"`
}

// CloseParams are the params of `session/close`.
type CloseParams struct {
	Session                string `json:"session"`
	Reason                 string `json:"reason"`
	DiscardPersistentState bool   `json:"discardPersistentState,omitempty"`
}

// StrictMembers reports that session/close params are read strictly too:
// a misspelt discardPersistentState must not silently keep the key's
// record and private HOME (found by a fresh-user trial; the schema's
// CloseParams has additionalProperties false).
func (*CloseParams) StrictMembers() bool { return true }

// SetModelParams are the params of `session/setModel`.
type SetModelParams struct {
	Session string `json:"session"`
	Model   string `json:"model"`
}

// SetModeParams are the params of `session/setMode`.
type SetModeParams struct {
	Session string `json:"session"`
	Mode    string `json:"mode"`
}

// SetConfigOptionParams are the params of `session/setConfigOption`.
type SetConfigOptionParams struct {
	Session string          `json:"session"`
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value"`
}

// UsageStatus is usage in `session/status`: cumulative and per request id.
type UsageStatus struct {
	Cumulative Usage            `json:"cumulative"`
	PerRequest map[string]Usage `json:"perRequest"`
	// Context is the last ACP usage_update's used/size (omitted before
	// the agent sent one).
	Context *ContextUsage `json:"context,omitempty"`
}

// ProcessStatus is the provider's liveness in `session/status`.
type ProcessStatus struct {
	Pid   int  `json:"pid"`
	Alive bool `json:"alive"`
}

// StatusResult is the result of `session/status` (docs/rules.md#r23).
type StatusResult struct {
	Session       string            `json:"session"`
	SessionKey    string            `json:"sessionKey"`
	Agent         string            `json:"agent"`
	State         SessionState      `json:"state"`
	Identity      Identity          `json:"identity"`
	Closed        bool              `json:"closed"`
	LastRequestID *string           `json:"lastRequestId"`
	Models        *Models           `json:"models,omitempty"`
	Modes         *Modes            `json:"modes,omitempty"`
	ConfigOptions []json.RawMessage `json:"configOptions,omitempty"`
	Usage         UsageStatus       `json:"usage"`
	Cost          *Cost             `json:"cost,omitempty"`
	Process       ProcessStatus     `json:"process"`
	Summary       string            `json:"summary"`
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
	Session         string       `json:"session"`
	SessionKey      string       `json:"sessionKey"`
	Agent           string       `json:"agent"`
	State           SessionState `json:"state"`
	Identity        *Identity    `json:"identity,omitempty"`
	ActiveRequestID *string      `json:"activeRequestId,omitempty"`
}

// SessionUpdateNotice is the `session/update` notification. Update is the
// ACP SessionUpdate verbatim; Seq starts at 1 per session with no gaps;
// RequestID is nil outside a turn (docs/protocol.md §9 session/update).
type SessionUpdateNotice struct {
	Session   string          `json:"session"`
	RequestID *string         `json:"requestId"`
	Seq       uint64          `json:"seq"`
	Update    json.RawMessage `json:"update"`
}

// ExitedNotice is the `session/exited` notification: the provider died on
// its own. During is "idle" or "turn".
type ExitedNotice struct {
	Session    string `json:"session"`
	SessionKey string `json:"sessionKey"`
	Pid        int    `json:"pid"`
	ExitCode   *int   `json:"exitCode,omitempty"`
	Signal     string `json:"signal,omitempty"`
	During     During `json:"during"`
	// Reason is "exit", "signal" or "oom" (docs/protocol.md §18.2).
	Reason string `json:"reason"`
}

// PermissionNotice is the `session/permission` audit notification.
// Decision is "approved", "denied", "escalated", "cancelled", "timeout"
// (DecisionTimeout), "malformed" (DecisionMalformed) or "overflow"
// (DecisionOverflow). OptionKind is the ACP kind of the option chosen
// (the one OptionID names), so an audit never infers it.
type PermissionNotice struct {
	Session    string   `json:"session"`
	RequestID  *string  `json:"requestId"`
	ToolCallID string   `json:"toolCallId"`
	Kind       string   `json:"kind"`
	Decision   Decision `json:"decision"`
	Rule       string   `json:"rule"`
	OptionID   string   `json:"optionId,omitempty"`
	OptionKind string   `json:"optionKind,omitempty"`
}

// PermissionRequestParams are the params of the sidecar → host request
// `session/requestPermission`; ToolCall and Options are ACP verbatim.
type PermissionRequestParams struct {
	Session   string          `json:"session"`
	RequestID *string         `json:"requestId"`
	ToolCall  json.RawMessage `json:"toolCall"`
	Options   json.RawMessage `json:"options"`
	Kind      string          `json:"kind"`
	Rule      string          `json:"rule"`
	// AnswerRefused is set on a request sent again because the host's
	// answer to the one before was refused: the -32602 error that answer
	// got (data.field names the member at fault). The ask stays pending
	// meanwhile (docs/protocol.md §9).
	AnswerRefused *ErrorObject `json:"answerRefused,omitempty"`
}

// ErrorObject is a JSON-RPC error object {code, message, data} as it
// travels inside another message.
type ErrorObject struct {
	Code    int       `json:"code"`
	Message string    `json:"message"`
	Data    ErrorData `json:"data"`
}

// PermissionRequestResult is the host's answer: Outcome AskSelected with
// OptionID, or AskCancelled.
type PermissionRequestResult struct {
	Outcome  AskOutcome `json:"outcome"`
	OptionID string     `json:"optionId,omitempty"`
}

// ProofNotice is the `cleanup/proof` notification.
type ProofNotice struct {
	Proof *Proof `json:"proof"`
}

// CloseResult is the result of `session/close`.
type CloseResult struct {
	Proof *Proof `json:"proof"`
}

// ShutdownResult is the result of `shutdown`.
type ShutdownResult struct {
	Proofs []*Proof `json:"proofs"`
}
