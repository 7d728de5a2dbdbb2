package protocol

// The handshake's types: initialize (docs/protocol.md §7) and what the
// sidecar says of itself in its result.

// InitializeParams are the params of `initialize` (docs/protocol.md §7).
type InitializeParams struct {
	// ProtocolVersion is required and must be Version (1); absent or any
	// other value is -32602 field "protocolVersion", the latter with
	// data.supported.
	ProtocolVersion *int `json:"protocolVersion"`
	// ClientInfo names the host program; optional and informational only.
	ClientInfo *Implementation `json:"clientInfo,omitempty"`
	// Capabilities are what the host can answer; an absent member
	// declares nothing.
	Capabilities HostCaps `json:"capabilities"`
}

// Implementation names a program and its version.
type Implementation struct {
	// Name is the program's name (ServerName in serverInfo).
	Name string `json:"name"`
	// Version is the program's version (in serverInfo, as --version
	// prints it, e.g. "0.1.0").
	Version string `json:"version"`
}

// HostCaps are what the host declares it can do. PermissionRequests: the
// host answers `session/requestPermission` (docs/protocol.md §9).
type HostCaps struct {
	// PermissionRequests: the host answers session/requestPermission;
	// absent or false, escalations follow each session's
	// nonInteractivePermissions.
	PermissionRequests bool `json:"permissionRequests"`
	// ExtRequests: the host answers `session/extRequest`, the agents' `_…`
	// requests (docs/protocol.md §23); without it they get -32601.
	ExtRequests bool `json:"extRequests,omitempty"`
	// Elicitation: the ACP elicitation modes the host answers as
	// session/elicitation (docs/protocol.md §22); nil declares none.
	Elicitation *ElicitationCaps `json:"elicitation,omitempty"`
}

// ServerName is initialize's serverInfo.name and the name the sidecar
// gives itself to agents (ACP clientInfo.name).
const ServerName = "acpx-sidecar"

// InitializeResult is the result of `initialize` (docs/protocol.md §7).
type InitializeResult struct {
	// ProtocolVersion is the version the sidecar speaks: Version (1).
	ProtocolVersion int `json:"protocolVersion"`
	// ServerInfo is {ServerName, the sidecar's build version}.
	ServerInfo Implementation `json:"serverInfo"`
	// Pid is the sidecar's own process id.
	Pid int `json:"pid"`
	// Capabilities are what this sidecar offers and enforces.
	Capabilities ServerCaps `json:"capabilities"`
	// Bounds are the time bounds in force.
	Bounds Bounds `json:"bounds"`
}

// ServerCaps reports the containment in force ("cgroup", "subreaper",
// "process-group", "process-table", or "none"), the agent profiles, the
// framing and the inbound frame cap in bytes.
type ServerCaps struct {
	// Containment is the mechanism in force: "cgroup", "subreaper",
	// "process-group" (as asked for), "process-table", or "none" when no
	// containment is available (every session/open is then refused
	// PLATFORM_UNSUPPORTED).
	Containment string `json:"containment"`
	// Agents are the profile names session/open `agent` accepts, sorted,
	// with "generic" last.
	Agents []string `json:"agents"`
	// Framing is the host framing in force (--framing): "ndjson" or "lsp".
	Framing string `json:"framing"`
	// MaxFrameBytes is the largest inbound host frame, in bytes
	// (--max-frame-bytes).
	MaxFrameBytes int `json:"maxFrameBytes"`
	// InheritEnv is the --inherit-env policy in force: "minimal", "all"
	// or "none" (docs/protocol.md §18.1).
	InheritEnv string `json:"inheritEnv"`
	// Sandbox is what this machine's kernel sandbox enforces
	// (docs/protocol.md §19).
	Sandbox *SandboxCaps `json:"sandbox,omitempty"`
	// MaxSessions is --max-sessions in force (given, or derived from the
	// descriptor limit): the live sessions this sidecar admits at once;
	// an open beyond it is SIDECAR_AT_CAPACITY (docs/protocol.md §21).
	MaxSessions int `json:"maxSessions,omitempty"`
	// MaxLiveTrees is --max-live-trees in force: provider trees alive at
	// once; a revive or open beyond it waits (docs/protocol.md §24).
	MaxLiveTrees int `json:"maxLiveTrees,omitempty"`
	// StateStore: the store provider state is published to, when
	// --state-store is set (docs/protocol.md §24).
	StateStore *StateStoreCaps `json:"stateStore,omitempty"`
}

// Bounds are the time bounds in force, in milliseconds; their defaults
// are docs/rules.md#bounds (config.DefaultBounds, internal/config).
type Bounds struct {
	// HandshakeTimeoutMs is the default bound on a session/open's whole
	// admission (an open's handshakeTimeoutMs overrides it) and the bound
	// on each setModel/setMode/setConfigOption call to the agent.
	HandshakeTimeoutMs int64 `json:"handshakeTimeoutMs"`
	// CloseTimeoutMs is the budget of a close's ACP session/close, all
	// attempts together, and how long a cancelled turn waits for the agent.
	CloseTimeoutMs int64 `json:"closeTimeoutMs"`
	// TermGraceMs is the wait after SIGTERM to the tree before SIGKILL.
	TermGraceMs int64 `json:"termGraceMs"`
	// KillGraceMs is the wait for the tree to exit after SIGKILL (and
	// after the cgroup.kill of a recovered leftover).
	KillGraceMs int64 `json:"killGraceMs"`
	// ShutdownMs bounds `shutdown`: its closes, retained cleanups and
	// sweeps.
	ShutdownMs int64 `json:"shutdownMs"`
	// ProtocolCloseAttempts bounds the ACP session/close attempts of a
	// live session's close (1 + retries, inside one closeTimeoutMs, so a
	// timed-out attempt ends it: docs/rules.md#r16).
	ProtocolCloseAttempts int `json:"protocolCloseAttempts"`
	// RetainedRetryMinMs and RetainedRetryMaxMs are the retained cleanup
	// backoff, doubling from the first to the second (docs/rules.md#r20).
	RetainedRetryMinMs int64 `json:"retainedRetryMinMs"`
	// RetainedRetryMaxMs caps that backoff (at least RetainedRetryMinMs).
	RetainedRetryMaxMs int64 `json:"retainedRetryMaxMs"`
	// RetainedCloseWindowMs bounds, all attempts together, the ACP
	// session/close of a session the agent created after its admission
	// was given up; its failures are retried for no count within it
	// (docs/rules.md#r20).
	RetainedCloseWindowMs int64 `json:"retainedCloseWindowMs"`
}
