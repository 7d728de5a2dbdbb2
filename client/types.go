package client

import (
	"encoding/json"
	"time"
)

// Command is the only executable the sidecar launches for a session
// (`command` of session/open): Path is absolute, Args is argv[1:], SHA256
// (optional, 64 hex digits) is the digest the file must have.
type Command struct {
	Path   string   `json:"path"`
	Args   []string `json:"args,omitempty"`
	SHA256 string   `json:"sha256,omitempty"`
}

// PermissionPolicy holds permission rules by ACP ToolKind ("read", "edit",
// "delete", "move", "search", "execute", "think", "fetch", "switch_mode",
// "other"), evaluated before PermissionMode (docs/protocol.md §10).
// DefaultAction is "approve", "deny" or "escalate".
type PermissionPolicy struct {
	AutoApprove   []string `json:"autoApprove,omitempty"`
	AutoDeny      []string `json:"autoDeny,omitempty"`
	Escalate      []string `json:"escalate,omitempty"`
	DefaultAction string   `json:"defaultAction,omitempty"`
}

// OpenParams are the params of session/open (docs/protocol.md §8). Empty
// strings, nil slices and maps, and a zero HandshakeTimeoutMs are left out,
// so the sidecar's defaults apply. Env is secret: the sidecar never logs
// or echoes it, and neither does this package. Resume nil means true.
type OpenParams struct {
	SessionKey                string            `json:"sessionKey"`
	Agent                     string            `json:"agent"`
	Command                   Command           `json:"command"`
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
	HandshakeTimeoutMs        int64             `json:"handshakeTimeoutMs,omitempty"`
	Resume                    *bool             `json:"resume,omitempty"`
	// InheritEnv, Limits, PermissionTimeoutMs: docs/protocol.md §16.
	InheritEnv          []string `json:"inheritEnv,omitempty"`
	Limits              *Limits  `json:"limits,omitempty"`
	PermissionTimeoutMs int64    `json:"permissionTimeoutMs,omitempty"`
}

// Identity is a session's admitted identity: AcpxRecordID is the
// sessionKey, BackendSessionID the ACP sessionId, AgentSessionID the
// agent's own id (or BackendSessionID).
type Identity struct {
	AcpxRecordID     string `json:"acpxRecordId"`
	BackendSessionID string `json:"backendSessionId"`
	AgentSessionID   string `json:"agentSessionId"`
}

// AgentInfo is the agent as its ACP initialize reported it; Capabilities
// is ACP agentCapabilities verbatim.
type AgentInfo struct {
	Name            string          `json:"name"`
	Title           string          `json:"title,omitempty"`
	Version         string          `json:"version"`
	ProtocolVersion int             `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
}

// Models is the model state the agent reports.
type Models struct {
	CurrentModelID    string   `json:"currentModelId"`
	AvailableModelIDs []string `json:"availableModelIds"`
}

// Modes is the mode state the agent reports.
type Modes struct {
	CurrentModeID    string   `json:"currentModeId"`
	AvailableModeIDs []string `json:"availableModeIds"`
}

// ProcessInfo is the provider leader (never its guardian) at open;
// Containment is "cgroup", "subreaper" or "process-group".
type ProcessInfo struct {
	Pid         int       `json:"pid"`
	Pgid        int       `json:"pgid"`
	StartedAt   time.Time `json:"startedAt"`
	Containment string    `json:"containment"`
}

// PermissionBinding says how the agent is held to the permission policy
// (docs/agents.md): Bound, the Mode it runs in, Via (how it was selected)
// and Autonomous (the host named a mode in which the agent decides alone).
type PermissionBinding struct {
	Bound      bool   `json:"bound"`
	Mode       string `json:"mode,omitempty"`
	Via        string `json:"via"`
	Autonomous bool   `json:"autonomous"`
}

// OpenResult is the result of session/open (docs/protocol.md §8). Models
// and Modes are nil when the agent reports none; ConfigOptions are ACP
// SessionConfigOption objects verbatim.
type OpenResult struct {
	Session           string            `json:"session"`
	SessionKey        string            `json:"sessionKey"`
	Identity          Identity          `json:"identity"`
	Resumed           bool              `json:"resumed"`
	Agent             AgentInfo         `json:"agent"`
	Models            *Models           `json:"models,omitempty"`
	Modes             *Modes            `json:"modes,omitempty"`
	ConfigOptions     []json.RawMessage `json:"configOptions"`
	Process           ProcessInfo       `json:"process"`
	PermissionBinding PermissionBinding `json:"permissionBinding"`
}

// PromptParams are the params of session/prompt without the session.
// RequestID is host-chosen and unique within the session and its resumes.
// Prompt is a non-empty string, a json.RawMessage holding an ACP
// ContentBlock[], or any value that marshals to one. TimeoutMs (0: none)
// bounds the turn; it then ends failed with error code TURN_TIMEOUT.
type PromptParams struct {
	RequestID string `json:"requestId"`
	Prompt    any    `json:"prompt"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// Update is one session/update notification: Update is the ACP
// SessionUpdate verbatim; Seq starts at 1 per sidecar session and rises by
// 1 with no gaps; RequestID is the turn's id, or nil outside a turn.
type Update struct {
	Session   string          `json:"session"`
	RequestID *string         `json:"requestId"`
	Seq       uint64          `json:"seq"`
	Update    json.RawMessage `json:"update"`
}

// Kind returns the update's ACP "sessionUpdate" discriminator
// ("agent_message_chunk", "tool_call", "usage_update", …), or "".
func (u Update) Kind() string {
	var k struct {
		SessionUpdate string `json:"sessionUpdate"`
	}
	_ = json.Unmarshal(u.Update, &k)
	return k.SessionUpdate
}

// Usage is token usage; the optional counts are nil when not reported.
type Usage struct {
	InputTokens       int64  `json:"inputTokens"`
	OutputTokens      int64  `json:"outputTokens"`
	TotalTokens       int64  `json:"totalTokens"`
	CachedReadTokens  *int64 `json:"cachedReadTokens,omitempty"`
	CachedWriteTokens *int64 `json:"cachedWriteTokens,omitempty"`
	ThoughtTokens     *int64 `json:"thoughtTokens,omitempty"`
}

// Cost is a money amount; Basis is "turn" in a PromptResult and
// "session-cumulative" in a StatusResult.
type Cost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	Basis    string  `json:"basis"`
}

// TurnError is the error of a failed turn (PromptResult.Error); Code is a
// data code of docs/protocol.md §5 (PROVIDER_PROCESS_LOST, TURN_TIMEOUT, …).
type TurnError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// PromptResult is the result of session/prompt. A turn that ends badly is
// still a result: Status is "completed", "cancelled" or "failed" (then
// Error is set); StopReason is the ACP stop reason when known; Usage and
// Cost are nil when absent.
type PromptResult struct {
	RequestID  string     `json:"requestId"`
	Status     string     `json:"status"`
	StopReason string     `json:"stopReason,omitempty"`
	Usage      *Usage     `json:"usage,omitempty"`
	Cost       *Cost      `json:"cost,omitempty"`
	Error      *TurnError `json:"error,omitempty"`
}

// CloseParams are the params of session/close without the session. Reason
// ("" means "host close") is copied into the proof;
// DiscardPersistentState deletes the session's record.
type CloseParams struct {
	Reason                 string `json:"reason,omitempty"`
	DiscardPersistentState bool   `json:"discardPersistentState,omitempty"`
}

// UsageStatus is session/status usage: cumulative and per request id.
type UsageStatus struct {
	Cumulative Usage            `json:"cumulative"`
	PerRequest map[string]Usage `json:"perRequest"`
}

// ProcessStatus is the provider leader's pid and liveness.
type ProcessStatus struct {
	Pid   int  `json:"pid"`
	Alive bool `json:"alive"`
}

// StatusResult is the result of session/status (docs/protocol.md §8).
// State is "admitting", "open", "turn", "closing", "closed" or "dead";
// LastRequestID is nil before the first turn.
type StatusResult struct {
	Session           string            `json:"session"`
	SessionKey        string            `json:"sessionKey"`
	Agent             string            `json:"agent"`
	State             string            `json:"state"`
	Identity          Identity          `json:"identity"`
	Closed            bool              `json:"closed"`
	LastRequestID     *string           `json:"lastRequestId"`
	Models            *Models           `json:"models,omitempty"`
	Modes             *Modes            `json:"modes,omitempty"`
	ConfigOptions     []json.RawMessage `json:"configOptions,omitempty"`
	Usage             UsageStatus       `json:"usage"`
	Cost              *Cost             `json:"cost,omitempty"`
	Process           ProcessStatus     `json:"process"`
	Summary           string            `json:"summary"`
	PermissionBinding PermissionBinding `json:"permissionBinding"`
	// Resources: the provider cgroup's usage and limits (docs/protocol.md
	// §16.2); nil outside cgroup containment.
	Resources *Resources `json:"resources,omitempty"`
}

// ListEntry is one session of session/list; Identity is nil while the
// session is admitting, ActiveRequestID nil outside a turn.
type ListEntry struct {
	Session         string    `json:"session"`
	SessionKey      string    `json:"sessionKey"`
	Agent           string    `json:"agent"`
	State           string    `json:"state"`
	Identity        *Identity `json:"identity,omitempty"`
	ActiveRequestID *string   `json:"activeRequestId,omitempty"`
}

// Exited is the session/exited notification: the provider died on its own.
// ExitCode is set for a normal exit, Signal (e.g. "SIGKILL") for a death by
// signal; During is "idle" or "turn". A Proof with origin "provider-exit"
// follows through OnProof.
type Exited struct {
	Session    string `json:"session"`
	SessionKey string `json:"sessionKey"`
	Pid        int    `json:"pid"`
	ExitCode   *int   `json:"exitCode,omitempty"`
	Signal     string `json:"signal,omitempty"`
	During     string `json:"during"`
	// Reason is "exit", "signal" or "oom" (docs/protocol.md §16.2).
	Reason string `json:"reason"`
}

// PermissionDecision is the session/permission audit notification.
// Decision is "approved", "denied", "escalated" or "cancelled"; Rule names
// the deciding rule ("host" when the host answered); RequestID is nil for
// an ask outside any turn.
type PermissionDecision struct {
	Session    string  `json:"session"`
	RequestID  *string `json:"requestId"`
	ToolCallID string  `json:"toolCallId"`
	Kind       string  `json:"kind"`
	Decision   string  `json:"decision"`
	Rule       string  `json:"rule"`
	OptionID   string  `json:"optionId,omitempty"`
}

// PermissionOption is one option the agent offers; Kind is "allow_once",
// "allow_always", "reject_once" or "reject_always".
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// PermissionRequest is the sidecar's session/requestPermission request.
// ToolCall is the agent's ACP tool call verbatim; Kind is the ToolKind the
// policy used; Rule names the rule that escalated; RequestID is the turn's
// id ("" when none).
type PermissionRequest struct {
	Session   string             `json:"session"`
	RequestID string             `json:"requestId"`
	ToolCall  json.RawMessage    `json:"toolCall"`
	Options   []PermissionOption `json:"options"`
	Kind      string             `json:"kind"`
	Rule      string             `json:"rule"`
}

// PermissionOutcome is the host's answer to a PermissionRequest; make it
// with Selected or Cancelled. The zero value is sent as cancelled.
type PermissionOutcome struct {
	Outcome  string `json:"outcome"`
	OptionID string `json:"optionId,omitempty"`
}

// Selected answers a PermissionRequest with the option whose OptionID is
// optionID (an unknown id counts as cancelled). The tool use is approved
// when that option's Kind starts with "allow".
func Selected(optionID string) PermissionOutcome {
	return PermissionOutcome{Outcome: "selected", OptionID: optionID}
}

// Cancelled answers a PermissionRequest with "cancelled": the agent is
// refused.
func Cancelled() PermissionOutcome { return PermissionOutcome{Outcome: "cancelled"} }

// Implementation names a program and its version.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ServerCaps are the sidecar's capabilities: Containment ("cgroup",
// "subreaper", "process-group" or "none"), agent profiles, framing and the
// inbound frame limit.
type ServerCaps struct {
	Containment   string   `json:"containment"`
	Agents        []string `json:"agents"`
	Framing       string   `json:"framing"`
	MaxFrameBytes int      `json:"maxFrameBytes"`
	// InheritEnv is the --inherit-env policy: "minimal", "all" or "none"
	// (docs/protocol.md §16.1).
	InheritEnv string `json:"inheritEnv"`
}

// Bounds are the sidecar's time bounds in milliseconds and retry counts
// (docs/protocol.md §2).
type Bounds struct {
	HandshakeTimeoutMs         int64 `json:"handshakeTimeoutMs"`
	CloseTimeoutMs             int64 `json:"closeTimeoutMs"`
	TermGraceMs                int64 `json:"termGraceMs"`
	KillGraceMs                int64 `json:"killGraceMs"`
	ShutdownMs                 int64 `json:"shutdownMs"`
	ProtocolCloseAttempts      int   `json:"protocolCloseAttempts"`
	RetainedRetryMinMs         int64 `json:"retainedRetryMinMs"`
	RetainedRetryMaxMs         int64 `json:"retainedRetryMaxMs"`
	LateCloseReconcileAttempts int   `json:"lateCloseReconcileAttempts"`
}

// InitializeResult is the sidecar's answer to initialize (Client.Info).
type InitializeResult struct {
	ProtocolVersion int            `json:"protocolVersion"`
	ServerInfo      Implementation `json:"serverInfo"`
	Pid             int            `json:"pid"`
	Capabilities    ServerCaps     `json:"capabilities"`
	Bounds          Bounds         `json:"bounds"`
}
