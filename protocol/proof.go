package protocol

import "time"

// ProofOrigin says what started a cleanup (Proof.Origin, docs/protocol.md
// §12).
type ProofOrigin string

// Proof origins.
const (
	// OriginClose: the host's session/close.
	OriginClose ProofOrigin = "close"
	// OriginAdmission: a failed session/open ended what it had launched.
	OriginAdmission ProofOrigin = "admission"
	// OriginShutdown: `shutdown` closed the session.
	OriginShutdown ProofOrigin = "shutdown"
	// OriginProviderExit: the provider exited on its own.
	OriginProviderExit ProofOrigin = "provider-exit"
	// OriginRecovered: a leftover of a dead sidecar found in the ownership
	// ledger.
	OriginRecovered ProofOrigin = "recovered"
)

// CloseOutcome is the outcome of a cleanup's ACP session/close
// (ProtocolClose.Outcome, docs/protocol.md §12).
type CloseOutcome string

// Protocol-close outcomes.
const (
	// CloseOK: the agent answered session/close.
	CloseOK CloseOutcome = "ok"
	// CloseError: the agent answered session/close with an error.
	CloseError CloseOutcome = "error"
	// CloseTimeout: session/close did not answer within its bound.
	CloseTimeout CloseOutcome = "timeout"
	// CloseUnsupported: the agent does not advertise
	// sessionCapabilities.close.
	CloseUnsupported CloseOutcome = "unsupported"
	// CloseSkipped: no session/close was sent (no ACP session, no live
	// provider, or no connection).
	CloseSkipped CloseOutcome = "skipped"
)

// Codes of ProofError.Code (docs/protocol.md §12 `errors`): the protocol
// close's, then the termination's (internal/reaper writes those as its
// ErrorRecord codes); a synthesized shutdown proof uses
// ErrCleanupIncomplete.
const (
	// ErrSignalDeliveryFailed: a signal could not be delivered.
	ErrSignalDeliveryFailed DataCode = "SIGNAL_DELIVERY_FAILED"
	// ErrProviderKillTimeout: the tree was not observed empty within
	// killGrace after SIGKILL ("provider did not exit after SIGKILL").
	ErrProviderKillTimeout DataCode = "PROVIDER_KILL_TIMEOUT"
	// ErrCgroupRemoveFailed: the tree is empty but its cgroup directory
	// could not be removed (the proof stays complete).
	ErrCgroupRemoveFailed DataCode = "CGROUP_REMOVE_FAILED"
	// ErrProtocolCloseTimeout: session/close did not answer in time.
	ErrProtocolCloseTimeout DataCode = "PROTOCOL_CLOSE_TIMEOUT"
	// ErrProtocolCloseFailed: session/close was answered with an error.
	ErrProtocolCloseFailed DataCode = "PROTOCOL_CLOSE_FAILED"
)

// Proof is a cleanup proof (docs/protocol.md §12). Complete is true only when
// the sidecar observed that no process of the provider tree is left.
type Proof struct {
	// CleanupID identifies this cleanup: "c-" and 16 hex digits (a second
	// close of a session returns the same one).
	CleanupID string `json:"cleanupId"`
	// Session is the sidecar's session id (for a recovered leftover, the
	// earlier sidecar's).
	Session string `json:"session"`
	// SessionKey is the host's key of that session.
	SessionKey string `json:"sessionKey"`
	// Reason is why the cleanup ran: the close's reason, "sidecar
	// shutdown", "provider exited", an admission reason, "shutdown bound
	// exceeded", "leftover of sidecar pid <pid>", ….
	Reason string `json:"reason"`
	// Origin is what started the cleanup (OriginClose, OriginAdmission,
	// OriginShutdown, OriginProviderExit, OriginRecovered, OriginRetire,
	// OriginFenced).
	Origin ProofOrigin `json:"origin"`
	// ProtocolClose is the outcome of the cleanup's ACP session/close.
	ProtocolClose ProtocolClose `json:"protocolClose"`
	// Signals are every signal sent, in order; empty (never null) when the
	// tree had already ended.
	Signals []ProofSignal `json:"signals"`
	// Processes are the tree's processes the sidecar saw gone, provider
	// first, at most MaxProofProcesses of them (the guardian never);
	// never null.
	Processes []ProofProcess `json:"processes"`
	// Containment is the containment mode used for this tree: "cgroup",
	// "subreaper", "process-group" or "process-table".
	Containment string `json:"containment"`
	// Verified says how the tree's emptiness was observed.
	Verified ProofVerified `json:"verified"`
	// Complete is true only when the sidecar observed that no process of
	// the tree is left, not merely that it sent signals.
	Complete bool `json:"complete"`
	// Attempts is the termination attempts: 1, plus one per retained
	// retry; 0 when no tree was run (nothing launched, a parked session)
	// and in a synthesized shutdown proof.
	Attempts int `json:"attempts"`
	// StartedAt is when the cleanup started.
	StartedAt Time `json:"startedAt"`
	// FinishedAt is when the cleanup ended.
	FinishedAt Time `json:"finishedAt"`
	// DurationMs is FinishedAt − StartedAt in milliseconds.
	DurationMs int64 `json:"durationMs"`
	// Errors are the cleanup's errors in the order they happened; empty
	// (never null) when there were none.
	Errors []ProofError `json:"errors"`

	// ProcessesOmitted counts the processes left out of Processes beyond
	// MaxProofProcesses (docs/protocol.md §18.4); absent when 0.
	ProcessesOmitted int `json:"processesOmitted,omitempty"`

	// Publication: what a retire's or close's publication of the provider
	// state did, when a state store is configured (docs/protocol.md §24).
	Publication *Publication `json:"publication,omitempty"`
}

// ProtocolClose is the outcome of the ACP session/close attempt.
type ProtocolClose struct {
	// Outcome is CloseOK, CloseError, CloseTimeout, CloseUnsupported or
	// CloseSkipped; of the last attempt when there were several.
	Outcome CloseOutcome `json:"outcome"`
	// Error is the redacted reason the close failed or timed out (or, for
	// a hung agent, why it was skipped); omitted otherwise.
	Error string `json:"error,omitempty"`
}

// ProofSignal is one signal delivery; Target is "tree", "provider" or
// "descendant".
type ProofSignal struct {
	// Signal is "SIGTERM" or "SIGKILL" (a cgroup.kill is reported as
	// "SIGKILL").
	Signal string `json:"signal"`
	// Target is whom it was sent to: "tree" (every member), "provider" or
	// "descendant".
	Target string `json:"target"`
	// At is when it was sent.
	At Time `json:"at"`
	// Error says why delivery failed; omitted when it was delivered.
	Error string `json:"error,omitempty"`
}

// ProofProcess is one process of the tree observed gone; Role is
// "provider" or "descendant". It always says how the process ended:
// ExitCode, Signal, or ReapedBy ReapedByParent when its own parent reaped
// it and the sidecar saw only that it was gone (docs/protocol.md §21,
// Proof entries).
type ProofProcess struct {
	// Pid is the process id.
	Pid int `json:"pid"`
	// Role is "provider" (the launched agent) or "descendant".
	Role string `json:"role"`
	// ExitCode is the exit status of a normal exit; null otherwise.
	ExitCode *int `json:"exitCode"`
	// Signal is the signal that ended it ("SIGKILL", …); under
	// process-table, for a process the sidecar did not reap, the last
	// signal the sidecar sent it. Omitted when none.
	Signal string `json:"signal,omitempty"`
	// ReapedBy is ReapedByParent when the process's own parent collected
	// its wait status; omitted otherwise.
	ReapedBy string `json:"reapedBy,omitempty"`
	// ExitedAt is when its exit was observed.
	ExitedAt Time `json:"exitedAt"`
}

// ReapedByParent is ProofProcess.ReapedBy of a process whose wait status
// its own parent collected: the sidecar saw it gone, never its status.
const ReapedByParent = "parent"

// ProofVerified says how emptiness was observed, e.g. method
// "cgroup.events populated 0".
type ProofVerified struct {
	// TreeEmpty says whether the tree was observed empty.
	TreeEmpty bool `json:"treeEmpty"`
	// Method says how it was (or was not) observed, one of the texts of
	// docs/protocol.md §12; "" in a synthesized shutdown proof.
	Method string `json:"method"`
}

// ProofError is one error of a cleanup, in the order they happened
// (docs/rules.md#r12).
type ProofError struct {
	// Code names the error (ErrProtocolCloseTimeout, ErrSignalDeliveryFailed,
	// ErrProviderKillTimeout, ErrCleanupIncomplete, …).
	Code DataCode `json:"code"`
	// Message is the error's human-readable text.
	Message string `json:"message"`
}

// Time is a timestamp on the wire: RFC 3339 in UTC with exactly nine
// fractional digits ("2026-11-29T17:18:24.946000000Z"), as docs/protocol.md
// §1 Conventions asks.
type Time struct{ time.Time }

// TimeLayout is the wire layout of Time.
const TimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// FormatTime renders t as the wire writes a time: in UTC, TimeLayout
// (docs/protocol.md §1). It is the one formatter of wire times, also used
// for the sidecar's log `ts`; the record file's times are acpx's
// (store.FormatTime).
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// At wraps t.
func At(t time.Time) Time { return Time{t} }

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + FormatTime(t.Time) + `"`), nil
}

// UnmarshalJSON implements json.Unmarshaler (any RFC 3339 string).
func (t *Time) UnmarshalJSON(b []byte) error {
	return t.Time.UnmarshalJSON(b)
}
