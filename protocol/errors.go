// Package protocol holds the wire types of the acpx-sidecar host protocol
// version 1 (docs/protocol.md): request params, results, notifications, the
// cleanup proof (docs/protocol.md §12) and the error model (§5). It has no
// behaviour beyond validation; the sidecar (internal/rpc,
// internal/adapter, internal/session) and Go hosts (package client) share it.
package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
)

// JSON-RPC numeric error codes used on the host connection (docs/protocol.md
// §5).
const (
	CodeParseError     = -32700 // malformed JSON
	CodeInvalidRequest = -32600 // invalid request, batch, oversized frame, request after shutdown
	CodeMethodNotFound = -32601 // unknown method
	CodeInvalidParams  = -32602 // invalid params; Data.Field names the first bad field
	CodeInternal       = -32603 // internal error (a bug)
	CodeNotInitialized = -32002 // a request before initialize
	CodeCancelled      = -32800 // request cancelled by $/cancelRequest
	CodeDomain         = -32000 // a domain failure; Data.Code says which
)

// DataCode is an error's stable `data.code` (docs/protocol.md §5), also a
// proof error's and a failed turn's `code`. Hosts switch on these, never on
// messages.
type DataCode string

// Stable data.code strings (docs/protocol.md §5).
const (
	ErrSessionNotFound       DataCode = "SESSION_NOT_FOUND"
	ErrTurnActive            DataCode = "TURN_ACTIVE"
	ErrDuplicateRequestID    DataCode = "DUPLICATE_REQUEST_ID"
	ErrSessionClosing        DataCode = "SESSION_CLOSING"
	ErrShuttingDown          DataCode = "SHUTTING_DOWN"
	ErrUnknownAgent          DataCode = "UNKNOWN_AGENT"
	ErrPlatformUnsupported   DataCode = "PLATFORM_UNSUPPORTED"
	ErrCommandNotExecutable  DataCode = "COMMAND_NOT_EXECUTABLE"
	ErrCommandDigestMismatch DataCode = "COMMAND_DIGEST_MISMATCH"
	ErrAdmissionAborted      DataCode = "ADMISSION_ABORTED"
	ErrHandshakeTimeout      DataCode = "ACPX_SESSION_HANDSHAKE_TIMEOUT"
	ErrEnsureFailed          DataCode = "ACPX_SESSION_ENSURE_FAILED"
	ErrIdentityInvalid       DataCode = "ACPX_IDENTITY_INVALID"
	ErrModelUnavailable      DataCode = "MODEL_UNAVAILABLE"
	ErrModeUnavailable       DataCode = "MODE_UNAVAILABLE"
	ErrUnsupportedControl    DataCode = "UNSUPPORTED_CONTROL"
	// ErrPolicyUnenforceable: the permission policy needs the agent to ask
	// (anything but a plain approve-all), but the agent cannot be bound to
	// ask: the host named an autonomous mode, or the agent offers no asking
	// mode (docs/agents.md).
	ErrPolicyUnenforceable      DataCode = "PERMISSION_POLICY_UNENFORCEABLE"
	ErrProviderProcessLost      DataCode = "PROVIDER_PROCESS_LOST"
	ErrStoreUnavailable         DataCode = "STORE_UNAVAILABLE"
	ErrPersistedSessionMissing  DataCode = "ACPX_PERSISTED_SESSION_MISSING"
	ErrPersistedSessionMismatch DataCode = "ACPX_PERSISTED_SESSION_IDENTITY_MISMATCH"
	ErrPermissionRequired       DataCode = "PERMISSION_APPROVAL_REQUIRED"
	ErrCleanupIncomplete        DataCode = "CLEANUP_INCOMPLETE"
	// ErrTurnTimeout: error.code of a turn that exceeded its timeoutMs.
	ErrTurnTimeout DataCode = "TURN_TIMEOUT"
	// ErrSessionKeyInUse: session/open for a sessionKey that another live
	// session of this sidecar already holds (an addition to the protocol's
	// first specification; docs/protocol.md §15).
	ErrSessionKeyInUse DataCode = "SESSION_KEY_IN_USE"
	// ErrSidecarAtCapacity: session/open beyond --max-sessions; nothing
	// launched, retryable, Data.Limit is the limit (docs/protocol.md §21).
	ErrSidecarAtCapacity DataCode = "SIDECAR_AT_CAPACITY"
	// ErrResourceExhausted: an admission step failed for want of
	// descriptors, processes or memory (EMFILE, ENFILE, EAGAIN, ENOMEM);
	// retryable, Data.Resource names which, with the proof
	// (docs/protocol.md §21).
	ErrResourceExhausted DataCode = "RESOURCE_EXHAUSTED"
	// ErrInvalidParams is data.code of every -32602 error.
	ErrInvalidParams DataCode = "INVALID_PARAMS"
	// ErrInvalidRequest is data.code of -32600 errors.
	ErrInvalidRequest DataCode = "INVALID_REQUEST"
	// ErrParse is data.code of -32700 errors.
	ErrParse DataCode = "PARSE_ERROR"
	// ErrMethodNotFound is data.code of -32601 errors.
	ErrMethodNotFound DataCode = "METHOD_NOT_FOUND"
	// ErrNotInitialized is data.code of -32002 errors.
	ErrNotInitialized DataCode = "NOT_INITIALIZED"
	// ErrInternal is data.code of -32603 errors.
	ErrInternal DataCode = "INTERNAL"
)

// ErrorData is the `data` member of every error the sidecar sends
// (docs/protocol.md §5). Code is the stable string; Field is the dot path of
// the first bad parameter for -32602; Supported lists protocol versions for
// an unsupported initialize. Cleanup and Proof are two members for two
// errors, never set together: Cleanup ends a failed session/open, Proof a
// session/close that could not finish.
type ErrorData struct {
	// Code is data.code, the stable string hosts switch on; always
	// present (INVALID_PARAMS and the like for the JSON-RPC level codes).
	Code DataCode `json:"code"`
	// Retryable is data.retryable, always present: true when the same
	// request may succeed later unchanged.
	Retryable bool `json:"retryable"`
	// Field is the dot path of the first bad parameter of a -32602 error
	// (e.g. "command.path", "env.FOO", "prompt.2.type"); absent otherwise.
	Field string `json:"field,omitempty"`
	// Cleanup is data.cleanup: set on the error of a session/open that
	// failed once its session existed (admission had begun), whatever its
	// code — the proof, origin "admission", of what the open had
	// launched; a trivially complete one ("nothing was launched",
	// attempts 0) when it failed before the launch. Never on a -32602
	// error or on a refusal that created no session (docs/protocol.md §5).
	Cleanup *Proof `json:"cleanup,omitempty"`
	// Proof is data.proof: set only on CLEANUP_INCOMPLETE from
	// session/close — the proof, complete false, of the attempt so far;
	// the final one follows as cleanup/proof (docs/protocol.md §5, §8
	// session/close).
	Proof *Proof `json:"proof,omitempty"`
	// Supported lists the protocol versions this sidecar speaks ([Version])
	// on the -32602 of an initialize with an unsupported protocolVersion.
	Supported []int `json:"supported,omitempty"`
	// Causes lists aggregated underlying failures in order (docs/rules.md#r12).
	Causes []ProofError `json:"causes,omitempty"`
	// Queued is the number of turns already queued, on a TURN_ACTIVE for
	// a `queue: true` prompt refused because the queue is full
	// (docs/protocol.md §8, Queued turns).
	Queued *int `json:"queued,omitempty"`
	// HeldBy says who holds the key of a SESSION_KEY_IN_USE:
	// HeldByThisSidecar or HeldByOtherSidecar (docs/protocol.md §5, §8
	// session/open).
	HeldBy string `json:"heldBy,omitempty"`
	// Paths names the never-writable paths of a SANDBOX_CONFLICT
	// (docs/protocol.md §19).
	Paths []string `json:"paths,omitempty"`
	// Limit is the --max-sessions in force, on a SIDECAR_AT_CAPACITY
	// (docs/protocol.md §21).
	Limit *int `json:"limit,omitempty"`
	// Resource is what ran out, on a RESOURCE_EXHAUSTED: ResourceFds,
	// ResourceProcesses or ResourceMemory (docs/protocol.md §21).
	Resource string `json:"resource,omitempty"`
	// Capability names the agent capability a CAPABILITY_UNSUPPORTED
	// lacks, as a dot path of ACP agentCapabilities (e.g.
	// "promptCapabilities.image"; docs/protocol.md §23).
	Capability string `json:"capability,omitempty"`
	// AuthMethods are the agent's ACP AuthMethod[] verbatim, on an
	// AUTH_REQUIRED (docs/protocol.md §23).
	AuthMethods []json.RawMessage `json:"authMethods,omitempty"`
	// Stderr is the end of the agent's stderr (at most 4096 bytes,
	// redacted), on an ACPX_SESSION_ENSURE_FAILED,
	// ACPX_SESSION_HANDSHAKE_TIMEOUT or SESSION_LOST of an open or revive
	// that launched the agent: what it said about why (docs/protocol.md §5).
	Stderr string `json:"stderr,omitempty"`
	// AgentError is the agent's JSON-RPC error object verbatim, on an
	// AGENT_ERROR (docs/protocol.md §23).
	AgentError json.RawMessage `json:"agentError,omitempty"`
}

// ErrorData.Resource values (docs/protocol.md §21): EMFILE and ENFILE are
// descriptors, EAGAIN (fork) processes, ENOMEM memory.
const (
	ResourceFds       = "fds"
	ResourceProcesses = "processes"
	ResourceMemory    = "memory"
)

// ErrorData.HeldBy values (docs/protocol.md §5 SESSION_KEY_IN_USE).
const (
	// HeldByThisSidecar: a live session of the sidecar that answered.
	HeldByThisSidecar = "this-sidecar"
	// HeldByOtherSidecar: a session of another sidecar process on the same
	// stateDir (the key's lock file, docs/operations.md).
	HeldByOtherSidecar = "another-sidecar"
)

// Error is a host-protocol error: JSON-RPC code, message and data. Its
// Message must never contain a launch secret; constructors in this package
// take only text the sidecar wrote or redacted.
type Error struct {
	// RPCCode is the JSON-RPC numeric error code: one of the Code*
	// constants (CodeDomain for every domain failure).
	RPCCode int
	// Message is the error text for people; hosts switch on Data.Code,
	// never on it.
	Message string
	// Data is the error's `data` member, sent with every error.
	Data ErrorData
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Data.Code, e.Message) }

// Domain returns a -32000 error with the given data.code.
func Domain(code DataCode, message string, retryable bool) *Error {
	return &Error{RPCCode: CodeDomain, Message: message, Data: ErrorData{Code: code, Retryable: retryable}}
}

// InvalidParams returns a -32602 error naming field (a dot path such as
// "command.path").
func InvalidParams(field, message string) *Error {
	return &Error{RPCCode: CodeInvalidParams, Message: message, Data: ErrorData{Code: ErrInvalidParams, Field: field}}
}

// Internal returns a -32603 error; message must be secret-free.
func Internal(message string) *Error {
	return &Error{RPCCode: CodeInternal, Message: message, Data: ErrorData{Code: ErrInternal}}
}

// QuoteShort returns s in double quotes for an error message, cut to its
// first 80 bytes with "…" appended when longer. s is neither escaped nor
// redacted: a caller quoting provider text redacts the result.
func QuoteShort(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return "\"" + s + "\""
}

// AsError converts any error into an *Error, mapping unknown errors to
// -32603 with a generic message (their text may not be secret-free).
func AsError(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return Internal("internal error")
}
