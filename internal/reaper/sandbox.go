package reaper

import "errors"

// ErrSandboxUnsupported is returned by Supervisor.Start for a Spec with a
// sandbox in a containment mode that cannot carry one (SandboxSupported);
// nothing is launched and the session answers PLATFORM_UNSUPPORTED.
var ErrSandboxUnsupported = errors.New("reaper: this containment mode cannot apply a sandbox")

// SandboxSupported reports whether providers contained in mode can be
// sandboxed. It is the one place that says so: cgroup mode (the sidecar
// forks the launch entry) and subreaper / process-group (the guardian
// forks it) can; ModeProcessTable, whose providers are forked straight
// from the sidecar with no launch entry to apply Landlock rules or a
// network namespace (macOS has neither), and any other mode refuse every
// explicit sandbox (PLATFORM_UNSUPPORTED), and the sidecar reports its
// default as not enforced.
func SandboxSupported(m Mode) bool {
	switch m {
	case ModeCgroup, ModeSubreaper, ModeProcessGroup:
		return true
	}
	return false
}
