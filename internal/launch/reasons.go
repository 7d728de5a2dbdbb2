package launch

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Proof reasons of failed admissions say what failed (docs/protocol.md
// §8 session/open, "Proof reason of a failed admission"; §18.5).

// BeforeLaunchReason is the proof reason of a failed admission that
// launched nothing (e its error): "admission failed before launch: <what> (<data.code>)".
func BeforeLaunchReason(e *protocol.Error) string {
	what := "the open was refused"
	switch e.Data.Code {
	case protocol.ErrStoreUnavailable:
		what = "the state directory could not be used"
	case protocol.ErrCommandNotExecutable:
		what = "the command could not be executed"
	case protocol.ErrCommandDigestMismatch:
		what = "the command did not match its sha256"
	case protocol.ErrAdmissionAborted:
		what = "the open was cancelled"
	case protocol.ErrShuttingDown:
		what = "the sidecar is shutting down"
	case protocol.ErrPlatformUnsupported:
		what = "the containment cannot enforce the open"
	case protocol.ErrInvalidParams:
		what = "invalid " + e.Data.Field
	case protocol.ErrResourceExhausted:
		what = "the sidecar ran out of " + admission.ResourceWords(e.Data.Resource)
	}
	code := e.Data.Code
	if code == "" {
		code = protocol.ErrInternal
	}
	return "admission failed before launch: " + what + " (" + string(code) + ")"
}

// launchedReason is the reason of a failed admission after the launch.
// The older reasons stay for the failures they always named: "admission
// aborted", "identity validation failed", "session handshake failed" (the
// agent refused a step); the others name the failure and its data.code.
func launchedReason(e *protocol.Error) string {
	switch e.Data.Code {
	case protocol.ErrAdmissionAborted:
		return "admission aborted"
	case protocol.ErrIdentityInvalid:
		return "identity validation failed"
	case protocol.ErrEnsureFailed:
		return "session handshake failed"
	case protocol.ErrHandshakeTimeout:
		return "session handshake timed out (ACPX_SESSION_HANDSHAKE_TIMEOUT)"
	case protocol.ErrStoreUnavailable:
		return "session record not saved (STORE_UNAVAILABLE)"
	case protocol.ErrShuttingDown:
		return "sidecar shutdown during admission (SHUTTING_DOWN)"
	case protocol.ErrModelUnavailable:
		return "model not available (MODEL_UNAVAILABLE)"
	case protocol.ErrModeUnavailable:
		return "mode not available (MODE_UNAVAILABLE)"
	case protocol.ErrUnsupportedControl:
		return "control not supported by the agent (UNSUPPORTED_CONTROL)"
	case protocol.ErrPolicyUnenforceable:
		return "permission policy cannot be enforced (PERMISSION_POLICY_UNENFORCEABLE)"
	case protocol.ErrResourceExhausted:
		return "the sidecar ran out of " + admission.ResourceWords(e.Data.Resource) + " (RESOURCE_EXHAUSTED)"
	case "":
		return "session handshake failed"
	}
	return "session handshake failed (" + string(e.Data.Code) + ")"
}
