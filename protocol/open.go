package protocol

import "encoding/json"

// The session/open request and its result (docs/protocol.md §8).

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
