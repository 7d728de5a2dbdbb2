package adapter

import (
	"errors"
	"syscall"

	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
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
