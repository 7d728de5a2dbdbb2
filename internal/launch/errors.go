package launch

import (
	"errors"
	"os"
	"syscall"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launchexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// What a failed session/open's error says about its cause, where the
// cause's error alone does not tell the host enough (docs/protocol.md §5).

// maxArgStrlen is Linux's MAX_ARG_STRLEN (32 pages of 4 KiB): execve
// refuses any one argument or environment string longer (E2BIG).
const maxArgStrlen = 32 * 4096

// e2bigField names the open's parameter an E2BIG launch is blamed on:
// command.args when one argument is over maxArgStrlen or the arguments
// outweigh the environment, env otherwise (found by a fresh-user trial:
// huge args were reported as env).
func e2bigField(args, env []string) string {
	na, ne := 0, 0
	for _, a := range args {
		if len(a) >= maxArgStrlen {
			return "command.args"
		}
		na += len(a) + 1
	}
	for _, v := range env {
		if len(v) >= maxArgStrlen {
			return "env"
		}
		ne += len(v) + 1
	}
	if na > ne {
		return "command.args"
	}
	return "env"
}

// storeRetryable is STORE_UNAVAILABLE's retryable for store.Open's err:
// false when the state directory's shape is wrong (a file where a
// directory belongs, a symlinked sessions or owned directory, a path
// component that is a file), which no retry clears; true otherwise (found
// by a fresh-user trial).
func storeRetryable(err error) bool {
	return !errors.Is(err, store.ErrNotDirectory) && !errors.Is(err, store.ErrUnsafeFile) && !errors.Is(err, syscall.ENOTDIR)
}

// launchError is the open's error for a Launcher.Start failure (args and
// env the launch's, for an E2BIG's field; clean redacts): SHUTTING_DOWN, the exhausted
// resource, SANDBOX_CONFLICT for a rule path that moved,
// PLATFORM_UNSUPPORTED for a sandbox or limits the machine refused,
// INVALID_PARAMS for E2BIG, else COMMAND_NOT_EXECUTABLE; the text
// redacted.
func launchError(clean func(string) string, err error, args, env []string) *protocol.Error {
	if errors.Is(err, reaper.ErrSealed) {
		return protocol.Domain(protocol.ErrShuttingDown, "the sidecar is shutting down", false)
	}
	// Before the sandbox's own refusal: a ruleset that could not be made
	// for want of descriptors is a retry later, not a machine that cannot
	// sandbox.
	if x := admission.Exhausted("the provider could not be started", err); x != nil {
		return x
	}
	switch {
	case errors.Is(err, sandbox.ErrRuleMoved):
		// A rule path was swapped for a link or another directory
		// between the plan and the launch (docs/protocol.md §19).
		e := protocol.Domain(protocol.ErrSandboxConflict, "a sandbox path changed before the launch, so the agent never ran: "+clean(err.Error()), false)
		var rm *sandbox.RuleMovedError
		if errors.As(err, &rm) {
			e.Data.Paths = []string{rm.Path}
		}
		return e
	case errors.Is(err, launchexec.ErrSandbox) || errors.Is(err, reaper.ErrSandboxUnsupported):
		return protocol.Domain(protocol.ErrPlatformUnsupported, "the sandbox could not be applied, so the agent never ran: "+clean(err.Error()), false)
	case errors.Is(err, reaper.ErrLimitsUnsupported):
		return protocol.Domain(protocol.ErrPlatformUnsupported, "limits cannot be enforced: "+clean(err.Error()), false)
	case errors.Is(err, syscall.E2BIG):
		// execve's argument list plus environment over the kernel's
		// limit: the open's env or command.args are too large.
		return protocol.InvalidParams(e2bigField(args, env), "the provider could not be started: its environment and arguments exceed the kernel's limit (E2BIG)")
	}
	return protocol.Domain(protocol.ErrCommandNotExecutable, "the provider could not be started: "+clean(err.Error()), false)
}

// ACPError turns the error of a provider call (step names it: "initialize",
// "session/close" …) into ACPX_SESSION_ENSURE_FAILED, the agent's message
// redacted by clean (docs/rules.md#r14).
func ACPError(clean func(string) string, step string, err error) *protocol.Error {
	var je *jsonrpc2.Error
	msg := "the agent failed " + step
	if errors.As(err, &je) {
		msg += ": " + clean(je.Message)
	} else if errors.Is(err, jsonrpc2.ErrClosed) {
		msg += ": the provider connection closed"
	}
	return protocol.Domain(protocol.ErrEnsureFailed, msg, false)
}

// ErrText is err's text for an open's error: an *os.PathError as
// "op path: cause", anything else as err.Error().
func ErrText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + " " + pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

// StoreUnavailable is STORE_UNAVAILABLE for a state-directory step
// (what, e.g. "the session journal cannot be read") that failed with
// err: the message names the step, the operation and the path (ErrText;
// never an environment value), retryable unless the directory's shape is
// wrong (storeRetryable).
func StoreUnavailable(what string, err error) *protocol.Error {
	return protocol.Domain(protocol.ErrStoreUnavailable, what+": "+ErrText(err), storeRetryable(err))
}
