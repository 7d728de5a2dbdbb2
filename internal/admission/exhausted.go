package admission

import (
	"errors"
	"strings"
	"syscall"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// resourceOf names the resource err says ran out: protocol.ResourceFds
// (EMFILE, ENFILE), ResourceProcesses (EAGAIN, as fork(2) and clone(2)
// report RLIMIT_NPROC and pids.max), ResourceMemory (ENOMEM), with the
// errno; "" for any other error. An error that carries no errno (a sandbox library's own
// wrapping, a launch entry's report through its status pipe) is matched by
// the errno's strerror text in its message.
func resourceOf(err error) (string, syscall.Errno) {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		msg := err.Error()
		for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM} {
			if strings.Contains(msg, e.Error()) {
				errno = e
				break
			}
		}
		if errno == 0 {
			return "", 0
		}
	}
	switch errno {
	case syscall.EMFILE, syscall.ENFILE:
		return protocol.ResourceFds, errno
	case syscall.EAGAIN:
		return protocol.ResourceProcesses, errno
	case syscall.ENOMEM:
		return protocol.ResourceMemory, errno
	}
	return "", 0
}

// Exhausted returns the RESOURCE_EXHAUSTED error for an admission step
// (what, e.g. "the provider could not be started") that failed with err,
// or nil when err is not an exhausted resource (resourceOf). The message
// names the step and the errno, never an environment value.
func Exhausted(what string, err error) *protocol.Error {
	res, errno := resourceOf(err)
	if res == "" {
		return nil
	}
	e := protocol.Domain(protocol.ErrResourceExhausted, what+": the sidecar ran out of "+resourceWords[res]+
		" ("+errnoName(errno)+"); retry later", true)
	e.Data.Resource = res
	return e
}

var resourceWords = map[string]string{protocol.ResourceFds: "file descriptors",
	protocol.ResourceProcesses: "processes", protocol.ResourceMemory: "memory"}

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EMFILE:
		return "EMFILE"
	case syscall.ENFILE:
		return "ENFILE"
	case syscall.EAGAIN:
		return "EAGAIN"
	case syscall.ENOMEM:
		return "ENOMEM"
	}
	return e.Error()
}

// OrExhausted is Exhausted(what, err) when err is an exhausted resource,
// else fallback.
func OrExhausted(what string, err error, fallback *protocol.Error) *protocol.Error {
	if e := Exhausted(what, err); e != nil {
		return e
	}
	return fallback
}

// ResourceWords names a protocol.Resource* value in words ("file
// descriptors", "processes", "memory"); "" for any other.
func ResourceWords(res string) string { return resourceWords[res] }
