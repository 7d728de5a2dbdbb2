package sandbox

import "errors"

// Forks, Started and ErrStep are Start's on every platform (apply_linux.go
// applies a plan; probe_other.go forks the agent of an empty one only).

// Forks are the processes Start forks from its restricted thread, with
// the caller's own attributes (cgroup, process group, descriptors,
// environment).
type Forks struct {
	// Init forks the PID namespace's init (InitCommand's program, its
	// control pipe as InitCtlFD) and returns its pid as the caller sees
	// it. Called only for a Plan with NewPIDNS, first thing after the
	// namespaces exist.
	Init func() (int, error)
	// Agent forks the provider last, on the fully restricted thread.
	// landlockFD is the ruleset the child must enforce itself (the
	// launch entry, which must execute the sidecar's own image first), or
	// -1 when the thread enforces it already (EntryLandlock false).
	Agent func(landlockFD int) (int, error)
	// EntryLandlock: hand the Landlock ruleset to Agent instead of
	// enforcing it on the thread.
	EntryLandlock bool
}

// Started is what Start forked: the init's and the agent's pids (0: not
// forked). A Start that failed after forking the init returns its pid
// too: the caller ends and reaps it.
type Started struct {
	// InitPid is the PID namespace's init, as the caller sees it (0: no
	// PID namespace, or not forked).
	InitPid int
	// AgentPid is the agent's pid (0: not forked).
	AgentPid int
}

// ErrStep is wrapped by every error of the Linux Start: the sandbox could not be
// applied, nothing of the agent ran.
var ErrStep = errors.New("sandbox: not applied")
