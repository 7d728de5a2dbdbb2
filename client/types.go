package client

import (
	"encoding/json"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Wire types that are the same for the sidecar and a Go host are aliases
// of package protocol's (docs/protocol.md; the JSON Schema
// docs/protocol.schema.json names each of them under $defs). The types
// defined in this file instead differ from the wire form for a host's
// convenience: the session is implied by the *Session, pointers become
// zero values, and permission requests are decoded.

// Each alias below is its own documented public name (doc.go, Types): a list alike only in form.

// Identity is a session's admitted identity: SessionKey is the
// sessionKey (on the wire identity.acpxRecordId), BackendSessionID the ACP
// sessionId, AgentSessionID the agent's own id (or BackendSessionID)
// (docs/protocol.md §8 session/open).
type Identity = protocol.Identity

// AgentInfo is the agent as its ACP initialize reported it; Capabilities
// is ACP agentCapabilities verbatim.
type AgentInfo = protocol.AgentInfo

// Models is the model state the agent reports (currentModelId,
// availableModelIds).
type Models = protocol.Models

// Modes is the mode state the agent reports (currentModeId,
// availableModeIds).
type Modes = protocol.Modes

// ProcessInfo is the provider leader (never its guardian) at open;
// Containment is "cgroup", "subreaper" or "process-group"; StartedAt is a
// protocol.Time (it embeds time.Time).
type ProcessInfo = protocol.ProcessInfo

// PermissionBinding says how the agent is held to the permission policy
// (docs/agents.md): Bound, the Mode it runs in, Via (how it was selected)
// and Autonomous (the host named a mode in which the agent decides alone).
type PermissionBinding = protocol.PermissionBinding

// OpenResult is the result of session/open (docs/protocol.md §8). Models
// and Modes are nil when the agent reports none; ConfigOptions are ACP
// SessionConfigOption objects verbatim; Lifecycle is the session's
// LifecycleMode and Restore what the open restored from the state store
// (nil: nothing; docs/protocol.md §24).
type OpenResult = protocol.OpenResult

// Usage is token usage; the optional counts are nil when not reported.
type Usage = protocol.Usage

// Cost is a money amount; Basis is "turn" in a PromptResult and
// "session-cumulative" in a StatusResult.
type Cost = protocol.Cost

// TurnError is the error of a failed turn (PromptResult.Error); Code is a
// data code of docs/protocol.md §5 (PROVIDER_PROCESS_LOST, TURN_TIMEOUT, …).
type TurnError = protocol.TurnError

// PromptResult is the result of session/prompt. A turn that ends badly is
// still a result: Status is "completed", "cancelled" or "failed" (then
// Error is set); StopReason is the ACP stop reason when known; Usage and
// Cost are nil when absent.
type PromptResult = protocol.PromptResult

// UsageStatus is session/status usage: cumulative and per request id.
type UsageStatus = protocol.UsageStatus

// ProcessStatus is the provider leader's pid and liveness.
type ProcessStatus = protocol.ProcessStatus

// StatusResult is the result of session/status (docs/protocol.md §8).
// State is "open", "turn", "closing", "closed" or "dead", or for a
// per-turn session "retiring", "parked" or "reviving"; LastRequestID is
// nil before the first turn. Lifecycle (a LifecycleStatus: retires,
// revives) and Store (the state store's head, nil without one) are
// docs/protocol.md §24.
type StatusResult = protocol.StatusResult

// Resources is session/status `resources`: the provider cgroup's memory
// and pids use and limits and its OOM-kill and pids-limit counters
// (docs/protocol.md §18.2).
type Resources = protocol.Resources

// ListEntry is one session of session/list; Identity is nil while the
// session is admitting, ActiveRequestID nil outside a turn.
type ListEntry = protocol.ListEntry

// Exited is the session/exited notification: the provider died on its own.
// ExitCode is set for a normal exit, Signal (e.g. "SIGKILL") for a death by
// signal; During is "idle" or "turn". A Proof with origin "provider-exit"
// follows through OnProof.
type Exited = protocol.ExitedNotice

// PermissionDecision is the session/permission audit notification
// (docs/protocol.md §9). Decision is "approved", "denied", "escalated",
// "cancelled", "timeout" (docs/protocol.md §18.3), "overflow" or
// "malformed" (§20; neither reaches the host); Rule names the deciding
// rule ("host" when the host answered); OptionKind is the chosen option's
// own kind; RequestID is nil for an ask outside any turn.
type PermissionDecision = protocol.PermissionNotice

// Implementation names a program and its version.
type Implementation = protocol.Implementation

// ServerCaps are the sidecar's capabilities: Containment ("cgroup",
// "subreaper", "process-group" or "none"), agent profiles, framing and the
// inbound frame limit; MaxLiveTrees (--max-live-trees) and StateStore
// (nil without --state-store) are docs/protocol.md §24.
type ServerCaps = protocol.ServerCaps

// Bounds are the sidecar's time bounds in milliseconds and retry counts
// (docs/protocol.md §2).
type Bounds = protocol.Bounds

// InitializeResult is the sidecar's answer to initialize (Client.Info).
type InitializeResult = protocol.InitializeResult

// PermissionPolicy holds permission rules by ACP ToolKind ("read", "edit",
// "delete", "move", "search", "execute", "think", "fetch", "switch_mode",
// "other"), evaluated before PermissionMode (docs/protocol.md §10).
// DefaultAction is "approve", "deny" or "escalate".
type PermissionPolicy = protocol.PermissionPolicy

// Command is the only executable the sidecar launches for a session
// (`command` of session/open): Path is absolute, Args is argv[1:], SHA256
// (optional, 64 hex digits) is the digest the file must have.
type Command struct {
	// Path is the absolute path of the executable (required).
	Path string `json:"path"`
	// Args are the arguments after argv[0] (nil: none); none may hold a
	// NUL byte.
	Args []string `json:"args,omitempty"`
	// SHA256 is the file's expected SHA-256, 64 hex digits ("": not
	// checked). When set, the sidecar opens the file without following
	// symlinks, hashes it and executes that same open file; another
	// digest fails the open COMMAND_DIGEST_MISMATCH.
	SHA256 string `json:"sha256,omitempty"`
}

// Limits are per-session resource limits of the provider's cgroup
// (`limits` of session/open, docs/protocol.md §18.2): MemoryBytes
// (memory.max, bytes), Pids (pids.max) and CPUPercent (cpu.max, percent of
// one CPU). Zero leaves the sidecar's default. A sidecar whose containment
// cannot enforce a limit refuses the open with PLATFORM_UNSUPPORTED.
// Connections (1-65536; zero: the default, 256) bounds the connections
// the tree may have open at once through a Sandbox.Network allow list
// (docs/protocol.md §19.1); it is no cgroup limit.
type Limits struct {
	// MemoryBytes is the tree's memory.max in bytes (1 MiB to 2^50; 0:
	// --default-memory-bytes).
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// Pids is the tree's pids.max, processes and threads together (2 to
	// 4194304; 0: --default-pids).
	Pids int64 `json:"pids,omitempty"`
	// CPUPercent is the tree's cpu.max in percent of one CPU, 200 being
	// two CPUs (1 to 100000; 0: --default-cpu-percent).
	CPUPercent int64 `json:"cpuPercent,omitempty"`
	// Connections is the most connections the tree may have open at once
	// through its Sandbox.Network allow list (1-65536; 0: 256).
	Connections int64 `json:"connections,omitempty"`
}

// Not protocol.OpenParams: a host's own shape (doc.go, Types: values not pointers, no session).

// OpenParams are the params of session/open (docs/protocol.md §8). Empty
// strings, nil slices and maps, and zero durations are left out, so the
// sidecar's defaults apply; in particular, with no HOME in Env (nor in
// InheritEnv) a sandboxed agent gets the key's private HOME
// (<StateDir>/homes/<key>, OpenResult.Sandbox.Home; docs/protocol.md §19).
// Env is secret: the sidecar never logs or echoes it, and neither does
// this package. InheritEnv names variables the
// sidecar adds from its own environment before Env (docs/protocol.md
// §18.1).
// Resume nil means true. PermissionTimeoutMs bounds a host escalation
// (default 600000).
type OpenParams struct {
	// SessionKey is the host's stable name of the conversation and the
	// id of its record on disk (required): 1-512 bytes of valid UTF-8
	// without NUL or U+FFFD, at most 249 bytes once encodeURIComponent'd.
	SessionKey string `json:"sessionKey"`
	// Agent is the agent profile, one of Client.Info's
	// Capabilities.Agents (required); "generic" suits any ACP agent and
	// binds nothing.
	Agent string `json:"agent"`
	// Command is the executable launched for the session (required).
	Command Command `json:"command"`
	// Cwd is the agent's working directory, an existing directory's
	// absolute path (required).
	Cwd string `json:"cwd"`
	// Env holds variables set over the inherited base, name to value
	// (nil: none). Secret; a relative HOME or TMPDIR is refused.
	Env map[string]string `json:"env,omitempty"`
	// InheritEnv names variables copied from the sidecar's environment
	// where it defines them (nil: none); Env still wins.
	InheritEnv []string `json:"inheritEnv,omitempty"`
	// StateDir is the absolute state directory ("": --state-dir).
	StateDir string `json:"stateDir,omitempty"`
	// Model is the model id set and verified after the handshake ("":
	// none asked for; MODEL_UNAVAILABLE when it is not offered).
	Model string `json:"model,omitempty"`
	// Mode is the mode id set and verified after the handshake
	// (MODE_UNAVAILABLE when it is not offered); "": none asked for, and
	// the permission binding may select the profile's asking mode.
	Mode string `json:"mode,omitempty"`
	// SystemPrompt is appended to the agent's system prompt through ACP
	// _meta.systemPrompt.append of session/new, never of a load or
	// resume ("": none).
	SystemPrompt string `json:"systemPrompt,omitempty"`
	// PermissionMode is "approve-all", "approve-reads" or "deny-all" ("":
	// "approve-reads").
	PermissionMode string `json:"permissionMode,omitempty"`
	// PermissionPolicy holds the rules evaluated before PermissionMode
	// (nil: none).
	PermissionPolicy *PermissionPolicy `json:"permissionPolicy,omitempty"`
	// NonInteractivePermissions is what an escalation the host does not
	// answer comes to: "deny" (the default, "") or "fail" (the turn ends
	// failed PERMISSION_APPROVAL_REQUIRED).
	NonInteractivePermissions string `json:"nonInteractivePermissions,omitempty"`
	// PermissionTimeoutMs bounds how long an escalation waits for the
	// host, in ms (1-86400000; 0: 600000).
	PermissionTimeoutMs int64 `json:"permissionTimeoutMs,omitempty"`
	// ElicitationTimeoutMs bounds one host elicitation (0: the
	// permission bound; docs/protocol.md §22).
	ElicitationTimeoutMs int64 `json:"elicitationTimeoutMs,omitempty"`
	// Limits are the resource limits of the provider's cgroup (nil: the
	// sidecar's --default-* flags).
	Limits *Limits `json:"limits,omitempty"`
	// McpServers are ACP McpServer objects, passed to the agent as
	// written (nil: none); an http or sse entry the agent does not take
	// fails the open CAPABILITY_UNSUPPORTED.
	McpServers []json.RawMessage `json:"mcpServers,omitempty"`
	// HandshakeTimeoutMs bounds the whole admission, launch to saved
	// record, in ms (1-600000; 0: the sidecar's --handshake-timeout-ms).
	HandshakeTimeoutMs int64 `json:"handshakeTimeoutMs,omitempty"`
	// Resume (nil: true) resumes the ACP session of the key's record
	// where it can (docs/protocol.md §11); false starts a new session with
	// fresh request ids.
	Resume *bool `json:"resume,omitempty"`
	// Sandbox is the kernel sandbox of the provider tree (docs/protocol.md
	// §19); nil leaves the sidecar's default (--default-sandbox).
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// Meta is an ACP _meta object merged, under the sidecar's own keys,
	// into the agent's session/new, session/load or session/resume (nil:
	// none; docs/protocol.md §23, ext.go).
	Meta json.RawMessage `json:"_meta,omitempty"`
	// AuthMethod is the id of one of the agent's OpenResult.AuthMethods,
	// run through ACP authenticate before the session is created or
	// resumed ("": the profile's rule; AUTH_FAILED, AUTH_REQUIRED).
	AuthMethod string `json:"authMethod,omitempty"`
	// AgentSessionID is one of the agent's own ACP session ids (e.g. from
	// Session.AgentSessions), resumed instead of the record's ("": none).
	AgentSessionID string `json:"agentSessionId,omitempty"`
	// AdditionalDirectories are absolute paths of existing directories
	// passed as ACP additionalDirectories and made writable in the
	// sandbox (nil: none; CAPABILITY_UNSUPPORTED when the agent lacks
	// them).
	AdditionalDirectories []string `json:"additionalDirectories,omitempty"`
	// Lifecycle, ReviveWaitMs, StateDirs and Publish: docs/protocol.md §24
	// (lifecycle.go). Lifecycle nil is warm; &Lifecycle{Mode:
	// LifecyclePerTurn} retires the tree after every turn and revives it
	// on the next call that needs the agent (the agent must offer ACP
	// session/resume or session/load, else CAPABILITY_UNSUPPORTED).
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
	// ReviveWaitMs (ms, 0 … 3600000; nil: the sidecar's 60000) bounds how
	// long the open, and each revive, waits for a live-tree slot
	// (--max-live-trees) before failing SIDECAR_AT_CAPACITY; 0 does not
	// wait.
	ReviveWaitMs *int64 `json:"reviveWaitMs,omitempty"`
	// StateDirs names the provider-state directories published to the
	// state store (--state-store), replacing the agent profile's: archive
	// name (1-64 of A-Z a-z 0-9 . _ -) → absolute path.
	StateDirs map[string]string `json:"stateDirs,omitempty"`
	// Publish is when a session with a state store publishes: PublishTurn
	// ("turn") also after every turn; "" only at retire and close.
	Publish string `json:"publish,omitempty"`
	// Effort and Thinking (1-64 printable bytes, "": none) are values of
	// the agent's effort and thinking config options (Pi's thought_level:
	// off, minimal, low, medium, high), applied and verified before the
	// first prompt and held: the open fails CONTROL_UNAVAILABLE, nothing
	// left running, when the agent does not offer the value; an agent that
	// moves one later ends its turn POLICY_BREACH (docs/protocol.md §24).
	Effort string `json:"effort,omitempty"`
	// Thinking is the value of the agent's thinking option (as Effort).
	Thinking string `json:"thinking,omitempty"`
	// AllowSlashCommands lets prompts that start with "/" reach an agent
	// whose profile guards them (copilot); otherwise such a prompt is
	// refused -32602 (docs/protocol.md §24).
	AllowSlashCommands bool `json:"allowSlashCommands,omitempty"`
}

// PolicyBreachNotice is the session/policyBreach notification: the agent
// moved a control the sidecar holds (Control: "mode" or a config option
// id) from Held to Reported; the turn RequestID names ended failed
// POLICY_BREACH; Restored says whether the sidecar set it back
// (docs/protocol.md §24). Options.OnPolicyBreach receives it.
type PolicyBreachNotice = protocol.PolicyBreachNotice

// Sandbox is `sandbox` of session/open (docs/protocol.md §19): filesystem
// "workspace", "strict" or "off"; extra writable and readable directories;
// network "all", "none", connectTcp ports or an allow list of destinations
// (AllowNetwork, docs/protocol.md §19.1); signals, processes ("own-tree" or
// "all": a PID namespace and /proc of the tree's own) and capabilities
// ("none" or "keep"), whose defaults with a filesystem sandbox are
// "own-tree", "own-tree" and "none". An explicit sandbox the sidecar's
// machine cannot enforce is refused PLATFORM_UNSUPPORTED; one that would
// make a never-writable path writable, SANDBOX_CONFLICT.
type Sandbox = protocol.Sandbox

// PromptParams are the params of session/prompt without the session.
// RequestID is host-chosen and unique within the session and its resumes.
// Prompt is a non-empty string, a json.RawMessage holding an ACP
// ContentBlock[], or any value that marshals to one. TimeoutMs (0: none)
// bounds the turn; it then ends failed with error code TURN_TIMEOUT. Queue
// waits behind the active turn instead of failing TURN_ACTIVE
// (docs/protocol.md §8 session/prompt, Queued turns). A Prompt too long
// for the sidecar's frame limit is refused before sending (see Error).
type PromptParams struct {
	// RequestID names the turn (required): 1-256 bytes of valid UTF-8
	// without NUL or U+FFFD, never used before in this session or an
	// earlier one of its key's record (else DUPLICATE_REQUEST_ID).
	RequestID string `json:"requestId"`
	// Prompt is the turn's input (required): a non-empty string, sent as
	// one text block, or a non-empty ACP ContentBlock[] forwarded as
	// written.
	Prompt any `json:"prompt"`
	// TimeoutMs bounds the turn in ms, a queued turn's from its start
	// (1-86400000; 0: no bound).
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Queue waits behind the session's active turn instead of failing
	// TURN_ACTIVE (docs/protocol.md §8, Queued turns).
	Queue bool `json:"queue,omitempty"`
	// Meta is an ACP _meta object for the agent's session/prompt (nil:
	// none; docs/protocol.md §23).
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// Not protocol.SessionUpdateNotice (or ExtNotice): this package's decoded notification (doc.go, Types), with Kind.

// Update is one session/update notification: Update is the ACP
// SessionUpdate verbatim; Seq starts at 1 per sidecar session and rises by
// 1 with no gaps; RequestID is the turn's id, or nil outside a turn.
type Update struct {
	// Session is the sidecar session id ("s-" and 16 hex digits).
	Session string `json:"session"`
	// RequestID is the active turn's id, or nil outside a turn; a
	// tool_call_update of a tool call begun in an earlier turn carries
	// that turn's id.
	RequestID *string `json:"requestId"`
	// Seq is the update's number within the session: 1, 2, 3, ….
	Seq uint64 `json:"seq"`
	// Update is the agent's ACP SessionUpdate object, its bytes as sent.
	Update json.RawMessage `json:"update"`
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

// CloseParams are the params of session/close without the session. Reason
// ("" means "host close") is copied into the proof;
// DiscardPersistentState deletes the session's record.
type CloseParams struct {
	// Reason is the proof's reason ("": "host close").
	Reason string `json:"reason,omitempty"`
	// DiscardPersistentState deletes the key's record and journal instead
	// of marking the record closed (and, with a state store, the key's
	// published objects), so the key's next open starts afresh.
	DiscardPersistentState bool `json:"discardPersistentState,omitempty"`
}

// PermissionOption is one option the agent offers; Kind is "allow_once",
// "allow_always", "reject_once" or "reject_always".
type PermissionOption struct {
	// OptionID is the agent's id of the option, the one Selected takes.
	OptionID string `json:"optionId"`
	// Name is the option's label for people.
	Name string `json:"name"`
	// Kind is the option's ACP PermissionOptionKind.
	Kind string `json:"kind"`
}

// PermissionRequest is the sidecar's session/requestPermission request.
// ToolCall is the agent's ACP tool call verbatim; Kind is the ToolKind the
// policy used; Rule names the rule that escalated; RequestID is the turn's
// id ("" when none).
type PermissionRequest struct {
	// Session is the sidecar session whose agent asks.
	Session string `json:"session"`
	// RequestID is the id of the turn the ask belongs to ("" when none).
	RequestID string `json:"requestId"`
	// ToolCall is the agent's ACP ToolCall object verbatim.
	ToolCall json.RawMessage `json:"toolCall"`
	// Options are the options the agent offers, in its order.
	Options []PermissionOption `json:"options"`
	// Kind is the ToolKind the policy used: the tool call's kind or, when
	// that is missing or unknown, one inferred from its title.
	Kind string `json:"kind"`
	// Rule names the rule that escalated, e.g.
	// "permissionMode:approve-reads" (docs/protocol.md §10).
	Rule string `json:"rule"`
	// AnswerRefused is set when the sidecar asks again because the
	// answer to its previous request for this ask was refused (neither
	// the flat shape nor ACP's): that answer's -32602 error, whose
	// Data.Field names the member at fault (docs/protocol.md §9). The
	// client's own answers (Selected, Cancelled) are never refused.
	AnswerRefused *protocol.ErrorObject `json:"answerRefused,omitempty"`
}

// PermissionOutcome is the host's answer to a PermissionRequest; make it
// with Selected or Cancelled. The zero value is sent as cancelled.
type PermissionOutcome struct {
	// Outcome is protocol.AskSelected or protocol.AskCancelled ("" is
	// sent as cancelled).
	Outcome protocol.AskOutcome `json:"outcome"`
	// OptionID is the chosen option's OptionID when Outcome is selected.
	OptionID string `json:"optionId,omitempty"`
}

// Selected answers a PermissionRequest with the option whose OptionID is
// optionID (an unknown id counts as cancelled). The tool use is approved
// when that option's Kind starts with "allow".
func Selected(optionID string) PermissionOutcome {
	return PermissionOutcome{Outcome: protocol.AskSelected, OptionID: optionID}
}

// Cancelled answers a PermissionRequest with "cancelled": the agent is
// refused.
func Cancelled() PermissionOutcome { return PermissionOutcome{Outcome: protocol.AskCancelled} }
