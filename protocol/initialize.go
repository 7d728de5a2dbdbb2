package protocol

// The handshake's types: initialize (docs/protocol.md §7) and what the
// sidecar says of itself in its result.

// InitializeParams are the params of `initialize` (docs/protocol.md §7).
type InitializeParams struct {
	ProtocolVersion *int            `json:"protocolVersion"`
	ClientInfo      *Implementation `json:"clientInfo,omitempty"`
	Capabilities    HostCaps        `json:"capabilities"`
}

// Implementation names a program and its version.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// HostCaps are what the host declares it can do. PermissionRequests: the
// host answers `session/requestPermission` (docs/protocol.md §9).
type HostCaps struct {
	PermissionRequests bool `json:"permissionRequests"`
	// ExtRequests: the host answers `session/extRequest`, the agents' `_…`
	// requests (docs/protocol.md §23); without it they get -32601.
	ExtRequests bool `json:"extRequests,omitempty"`
	// Elicitation: the ACP elicitation modes the host answers as
	// session/elicitation (docs/protocol.md §22); nil declares none.
	Elicitation *ElicitationCaps `json:"elicitation,omitempty"`
}

// InitializeResult is the result of `initialize`.
// ServerName is initialize's serverInfo.name and the name the sidecar
// gives itself to agents (ACP clientInfo.name).
const ServerName = "acpx-sidecar"

type InitializeResult struct {
	ProtocolVersion int            `json:"protocolVersion"`
	ServerInfo      Implementation `json:"serverInfo"`
	Pid             int            `json:"pid"`
	Capabilities    ServerCaps     `json:"capabilities"`
	Bounds          Bounds         `json:"bounds"`
}

// ServerCaps reports the containment in force ("cgroup", "subreaper",
// "process-group"), the agent profiles, the framing and the inbound frame
// cap in bytes.
type ServerCaps struct {
	Containment   string   `json:"containment"`
	Agents        []string `json:"agents"`
	Framing       string   `json:"framing"`
	MaxFrameBytes int      `json:"maxFrameBytes"`
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
	HandshakeTimeoutMs int64 `json:"handshakeTimeoutMs"`
	CloseTimeoutMs     int64 `json:"closeTimeoutMs"`
	TermGraceMs        int64 `json:"termGraceMs"`
	KillGraceMs        int64 `json:"killGraceMs"`
	ShutdownMs         int64 `json:"shutdownMs"`
	// ProtocolCloseAttempts bounds the ACP session/close attempts of a
	// live session's close (1 + retries, inside one closeTimeoutMs, so a
	// timed-out attempt ends it: docs/rules.md#r16).
	ProtocolCloseAttempts int `json:"protocolCloseAttempts"`
	// RetainedRetryMinMs and RetainedRetryMaxMs are the retained cleanup
	// backoff, doubling from the first to the second (docs/rules.md#r20).
	RetainedRetryMinMs int64 `json:"retainedRetryMinMs"`
	RetainedRetryMaxMs int64 `json:"retainedRetryMaxMs"`
	// RetainedCloseWindowMs bounds, all attempts together, the ACP
	// session/close of a session the agent created after its admission
	// was given up; its failures are retried for no count within it
	// (docs/rules.md#r20).
	RetainedCloseWindowMs int64 `json:"retainedCloseWindowMs"`
}
