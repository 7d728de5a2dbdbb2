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
	// Path is the executable's absolute path; required.
	Path string `json:"path"`
	// Args are its argv[1:]; no entry may contain NUL.
	Args []string `json:"args,omitempty"`
	// Sha256, when set, is the 64 hex digits the file's SHA-256 must be:
	// the file is opened without following symlinks, hashed, and that same
	// open file executed (else COMMAND_DIGEST_MISMATCH). Empty: no check.
	Sha256 string `json:"sha256,omitempty"`
}

// PermissionPolicy are permission rules by ACP ToolKind, evaluated before
// permissionMode. DefaultAction is ActionApprove, ActionDeny or
// ActionEscalate.
type PermissionPolicy struct {
	// AutoApprove are the ToolKinds approved without asking (checked
	// after AutoDeny).
	AutoApprove []string `json:"autoApprove,omitempty"`
	// AutoDeny are the ToolKinds denied without asking (checked first).
	AutoDeny []string `json:"autoDeny,omitempty"`
	// Escalate are the ToolKinds put to the host, or to
	// nonInteractivePermissions (checked after AutoApprove).
	Escalate []string `json:"escalate,omitempty"`
	// DefaultAction decides a kind no list names; empty: permissionMode
	// decides it (docs/protocol.md §10).
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
	// SessionKey is the host's stable name for the conversation and the
	// record id on disk; required, 1-512 bytes of valid UTF-8 without NUL
	// or U+FFFD, compared exactly.
	SessionKey string `json:"sessionKey"`
	// Agent is the profile name, one of initialize's capabilities.agents;
	// required.
	Agent string `json:"agent"`
	// Command is the provider to launch; required.
	Command *Command `json:"command"`
	// Cwd is the provider's working directory: an absolute path of an
	// existing directory; required.
	Cwd string `json:"cwd"`
	// Env is added on top of the inherited environment (an entry wins over
	// the base): names non-empty without '=' or NUL, values without NUL,
	// HOME and TMPDIR absolute.
	Env map[string]string `json:"env,omitempty"`
	// StateDir is the absolute state directory of the key's record,
	// journal and ownership ledger, kept in its lexically clean form;
	// empty: --state-dir.
	StateDir string `json:"stateDir,omitempty"`
	// Model is a model id, selected and verified after the handshake
	// (else MODEL_UNAVAILABLE) and pinned; empty: a resume re-applies the
	// pinned one, else the agent keeps its own.
	Model string `json:"model,omitempty"`
	// Mode is a mode id, set, verified and pinned the same way (else
	// MODE_UNAVAILABLE); empty: a resume's pinned mode, else the
	// profile's asking mode (docs/agents.md).
	Mode string `json:"mode,omitempty"`
	// SystemPrompt is sent as ACP `_meta.systemPrompt.append` on
	// session/new (not on load or resume).
	SystemPrompt string `json:"systemPrompt,omitempty"`
	// PermissionMode is "approve-all", "approve-reads" or "deny-all";
	// Validate fills in DefaultPermissionMode when empty.
	PermissionMode string `json:"permissionMode,omitempty"`
	// PermissionPolicy, when set, is checked before PermissionMode.
	PermissionPolicy *PermissionPolicy `json:"permissionPolicy,omitempty"`
	// NonInteractivePermissions is what an escalation does when the host
	// cannot answer it: "deny" or "fail"; Validate fills in
	// DefaultNonInteractive when empty.
	NonInteractivePermissions string `json:"nonInteractivePermissions,omitempty"`
	// McpServers are ACP McpServer objects, passed verbatim to
	// session/new, load and resume ([] when absent).
	McpServers []json.RawMessage `json:"mcpServers,omitempty"`
	// HandshakeTimeoutMs bounds the whole admission, launch to record
	// saved (ms, 1-MaxHandshakeTimeoutMs); nil: bounds.handshakeTimeoutMs.
	HandshakeTimeoutMs *int64 `json:"handshakeTimeoutMs,omitempty"`
	// Resume: resume the key's recorded ACP session where one qualifies;
	// nil means true (docs/protocol.md §11).
	Resume *bool `json:"resume,omitempty"`
	// InheritEnv names variables taken from the sidecar's own environment
	// on top of the --inherit-env base (Env still wins); each non-empty,
	// without '=' or NUL (docs/protocol.md §18.1, protocol/limits.go).
	InheritEnv []string `json:"inheritEnv,omitempty"`
	// Limits are the provider cgroup's resource limits
	// (docs/protocol.md §18.2); nil: each member takes its default.
	Limits *Limits `json:"limits,omitempty"`
	// PermissionTimeoutMs bounds how long a host escalation may stay
	// unanswered before nonInteractivePermissions decides it (ms,
	// 1-MaxPermissionTimeoutMs); nil: DefaultPermissionTimeoutMs
	// (docs/protocol.md §18.3).
	PermissionTimeoutMs *int64 `json:"permissionTimeoutMs,omitempty"`
	// ElicitationTimeoutMs bounds one host elicitation (default
	// permissionTimeoutMs; docs/protocol.md §22).
	ElicitationTimeoutMs *int64 `json:"elicitationTimeoutMs,omitempty"`
	// Sandbox: docs/protocol.md §19 (protocol/sandbox.go); nil = the
	// sidecar's default.
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// Meta, AuthMethod, AgentSessionID and AdditionalDirectories:
	// docs/protocol.md §23 (protocol/ext.go). Meta is merged into the ACP
	// session/new|load|resume `_meta` under the sidecar's own keys.
	Meta json.RawMessage `json:"_meta,omitempty"`
	// AuthMethod is an id of the agent's authMethods: ACP authenticate
	// runs with it before the session is created or resumed, instead of
	// the profile's rule; nil: the profile's rule. Empty is -32602.
	AuthMethod *string `json:"authMethod,omitempty"`
	// AgentSessionID is one of the agent's own ACP session ids, resumed
	// (or loaded) instead of the record's; nil: the record's, if any.
	// Empty is -32602.
	AgentSessionID *string `json:"agentSessionId,omitempty"`
	// AdditionalDirectories are absolute paths of existing directories,
	// sent as ACP additionalDirectories where the agent advertises them
	// (else CAPABILITY_UNSUPPORTED) and made writable in the sandbox.
	AdditionalDirectories []string `json:"additionalDirectories,omitempty"`
	// Lifecycle, ReviveWaitMs, StateDirs and Publish: docs/protocol.md
	// §24 (protocol/lifecycle.go). Lifecycle nil is warm; ReviveWaitMs
	// (ms) bounds a wait for a live-tree slot (--max-live-trees; default
	// DefaultReviveWaitMs); StateDirs names the provider-state
	// directories to publish, overriding the profile's (name → absolute
	// path); Publish "turn" publishes after every turn too.
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
	// ReviveWaitMs is how long an open or a revive waits for a live-tree
	// slot before SIDECAR_AT_CAPACITY (ms, 0-MaxReviveWaitMs); nil:
	// DefaultReviveWaitMs.
	ReviveWaitMs *int64 `json:"reviveWaitMs,omitempty"`
	// StateDirs maps names (1-64 of A-Z a-z 0-9 . _ -, not starting with
	// . _ -) to absolute provider-state directories that move with the
	// key, replacing the profile's; used only with --state-store.
	StateDirs map[string]string `json:"stateDirs,omitempty"`
	// Publish is PublishTurn ("turn") or empty: "turn" makes a warm
	// session publish after each turn too (with --state-store only).
	Publish string `json:"publish,omitempty"`
	// Effort and Thinking: docs/protocol.md §24, effort and thinking
	// (protocol/seed.go): a value of the agent's effort config option, or
	// of its thinking option (Pi's thought_level), applied and verified
	// before the first prompt; CONTROL_UNAVAILABLE when the agent does not
	// offer it. AllowSlashCommands lets prompts that start with "/" reach
	// an agent whose profile guards them (Copilot).
	Effort string `json:"effort,omitempty"`
	// Thinking is a value of the agent's thinking option (1-64 printable
	// bytes), set, verified and then held like Effort; empty: not set.
	Thinking string `json:"thinking,omitempty"`
	// AllowSlashCommands lets a prompt whose text starts with "/" reach an
	// agent whose profile guards slash commands (Copilot); false: such a
	// prompt is -32602.
	AllowSlashCommands bool `json:"allowSlashCommands,omitempty"`
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
	// Name is the agent's ACP agentInfo.name ("" when it reported none).
	Name string `json:"name"`
	// Title is its agentInfo.title, omitted when absent.
	Title string `json:"title,omitempty"`
	// Version is its agentInfo.version ("" when it reported none).
	Version string `json:"version"`
	// ProtocolVersion is the ACP protocol version the agent speaks.
	ProtocolVersion int `json:"protocolVersion"`
	// Capabilities is ACP agentCapabilities verbatim ({} when absent).
	Capabilities json.RawMessage `json:"capabilities"`
}

// Models is the model state an agent reports.
type Models struct {
	// CurrentModelID is the model the session runs.
	CurrentModelID string `json:"currentModelId"`
	// AvailableModelIDs are the model ids the agent offers.
	AvailableModelIDs []string `json:"availableModelIds"`
}

// Modes is the mode state an agent reports.
type Modes struct {
	// CurrentModeID is the mode the session runs in.
	CurrentModeID string `json:"currentModeId"`
	// AvailableModeIDs are the mode ids the agent offers.
	AvailableModeIDs []string `json:"availableModeIds"`
}

// ProcessInfo describes a provider process at open.
type ProcessInfo struct {
	// Pid is the provider leader's pid (never its guardian's).
	Pid int `json:"pid"`
	// Pgid is the provider leader's process group id.
	Pgid int `json:"pgid"`
	// StartedAt is when the provider was launched.
	StartedAt Time `json:"startedAt"`
	// Containment is the mode the tree runs under: "cgroup", "subreaper",
	// "process-group" or "process-table".
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
	// Bound: every tool use the agent would decide alone reaches ACP
	// session/request_permission, so the host's policy decides it.
	Bound bool `json:"bound"`
	// Mode is the mode the agent runs in; omitted when it reports none.
	Mode string `json:"mode,omitempty"`
	// Via is how the agent was bound (one of the strings listed above).
	Via string `json:"via"`
	// Autonomous: the host named a mode in which the agent decides alone.
	Autonomous bool `json:"autonomous"`
}

// OpenResult is the result of `session/open`.
type OpenResult struct {
	// Session is the new sidecar session id ("s-" and 16 hex digits).
	Session string `json:"session"`
	// SessionKey is the open's sessionKey, echoed.
	SessionKey string `json:"sessionKey"`
	// Identity is the admitted identity.
	Identity Identity `json:"identity"`
	// Resumed: an existing ACP session was loaded or resumed.
	Resumed bool `json:"resumed"`
	// Agent is what the agent's ACP initialize reported.
	Agent AgentInfo `json:"agent"`
	// Models is the agent's model state, from ACP models or its model
	// config option; nil when it reports neither.
	Models *Models `json:"models,omitempty"`
	// Modes is the agent's mode state, from ACP modes or its mode config
	// option; nil when it reports neither.
	Modes *Modes `json:"modes,omitempty"`
	// ConfigOptions are ACP SessionConfigOption[] verbatim ([] if none).
	ConfigOptions []json.RawMessage `json:"configOptions"`
	// Process is the provider leader's process (not its guardian).
	Process ProcessInfo `json:"process"`
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
