package client

import "time"

// Proof is a cleanup proof (docs/protocol.md §12): what one cleanup did to
// a provider tree and how it verified the tree gone. Complete is true only
// when the sidecar observed that no process of the tree is left. Origin is
// "close", "admission", "shutdown", "provider-exit" or "recovered".
type Proof struct {
	CleanupID     string         `json:"cleanupId"`
	Session       string         `json:"session"`
	SessionKey    string         `json:"sessionKey"`
	Reason        string         `json:"reason"`
	Origin        string         `json:"origin"`
	ProtocolClose ProtocolClose  `json:"protocolClose"`
	Signals       []ProofSignal  `json:"signals"`
	Processes     []ProofProcess `json:"processes"`
	Containment   string         `json:"containment"`
	Verified      ProofVerified  `json:"verified"`
	Complete      bool           `json:"complete"`
	Attempts      int            `json:"attempts"`
	StartedAt     time.Time      `json:"startedAt"`
	FinishedAt    time.Time      `json:"finishedAt"`
	DurationMs    int64          `json:"durationMs"`
	Errors        []ProofError   `json:"errors"`

	// ProcessesOmitted counts processes left out of Processes beyond 256
	// (docs/protocol.md §16.4).
	ProcessesOmitted int `json:"processesOmitted,omitempty"`
}

// ProtocolClose is the outcome of the ACP session/close attempts: "ok",
// "error", "timeout", "unsupported" or "skipped"; Error is the redacted
// reason.
type ProtocolClose struct {
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// ProofSignal is one signal sent: Signal "SIGTERM" or "SIGKILL", Target
// "tree", "provider" or "descendant"; Error is set when delivery failed.
type ProofSignal struct {
	Signal string    `json:"signal"`
	Target string    `json:"target"`
	At     time.Time `json:"at"`
	Error  string    `json:"error,omitempty"`
}

// ProofProcess is one process of the tree seen gone: Role "provider" or
// "descendant"; ExitCode is nil when it did not exit normally, and then
// Signal names what ended it.
type ProofProcess struct {
	Pid      int       `json:"pid"`
	Role     string    `json:"role"`
	ExitCode *int      `json:"exitCode"`
	Signal   string    `json:"signal,omitempty"`
	ExitedAt time.Time `json:"exitedAt"`
}

// ProofVerified says whether the tree was observed empty, and how
// (Method, e.g. "cgroup.events populated 0").
type ProofVerified struct {
	TreeEmpty bool   `json:"treeEmpty"`
	Method    string `json:"method"`
}

// ProofError is one error of a cleanup, in the order they happened
// (PROTOCOL_CLOSE_TIMEOUT, PROVIDER_KILL_TIMEOUT, …; docs/protocol.md §12).
type ProofError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
