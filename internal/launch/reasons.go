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
	what, ok := beforeLaunchWhat[e.Data.Code]
	switch {
	case e.Data.Code == protocol.ErrInvalidParams:
		what = "invalid " + e.Data.Field
	case e.Data.Code == protocol.ErrResourceExhausted:
		what = "the sidecar ran out of " + admission.ResourceWords(e.Data.Resource)
	case !ok:
		what = "the open was refused"
	}
	code := e.Data.Code
	if code == "" {
		code = protocol.ErrInternal
	}
	return "admission failed before launch: " + what + " (" + string(code) + ")"
}

// beforeLaunchWhat is what failed, in BeforeLaunchReason, by data.code
// (the codes whose words name nothing of the error's data).
var beforeLaunchWhat = map[protocol.DataCode]string{
	protocol.ErrStoreUnavailable:      "the state directory could not be used",
	protocol.ErrCommandNotExecutable:  "the command could not be executed",
	protocol.ErrCommandDigestMismatch: "the command did not match its sha256",
	protocol.ErrAdmissionAborted:      "the open was cancelled",
	protocol.ErrShuttingDown:          "the sidecar is shutting down",
	protocol.ErrPlatformUnsupported:   "the containment cannot enforce the open",
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
