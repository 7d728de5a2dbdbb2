package client

import "github.com/acpx-sidecar/acpx-sidecar/protocol"

// Proof is a cleanup proof (docs/protocol.md §12): what one cleanup did to
// a provider tree and how it verified the tree gone. Complete is true only
// when the sidecar observed that no process of the tree is left. Origin is
// "close", "admission", "shutdown", "provider-exit" or "recovered", or
// "retire" (a per-turn session's tree ended after a turn) and "fenced"
// (ended because another sidecar took the key over); Publication, set when
// a state store is configured, is what the cleanup published
// (docs/protocol.md §24).
type Proof = protocol.Proof

// ProtocolClose is the outcome of the ACP session/close attempts: "ok",
// "error", "timeout", "unsupported" or "skipped"; Error is the redacted
// reason.
type ProtocolClose = protocol.ProtocolClose

// ProofSignal is one signal sent: Signal "SIGTERM" or "SIGKILL", Target
// "tree", "provider" or "descendant"; Error is set when delivery failed.
type ProofSignal = protocol.ProofSignal

// ProofProcess is one process of the tree seen gone: Role "provider" or
// "descendant"; ExitCode is nil when it did not exit normally, and then
// Signal names what ended it.
type ProofProcess = protocol.ProofProcess

// ProofVerified says whether the tree was observed empty, and how
// (Method, e.g. "cgroup.events populated 0").
type ProofVerified = protocol.ProofVerified

// ProofError is one error of a cleanup, in the order they happened
// (PROTOCOL_CLOSE_TIMEOUT, PROVIDER_KILL_TIMEOUT, …; docs/protocol.md §12).
type ProofError = protocol.ProofError
