package main

import "github.com/acpx-sidecar/acpx-sidecar/internal/egress"

// options are the daemon's parsed flags (parseFlags), grouped by job: the
// host connection, the state dir, the providers' environment and logging
// at the top; a session's bounds, the caps, the containment and sandbox of
// provider trees, the default limits and the state store each in a group
// of their own.
type options struct {
	framing  string // --framing
	maxFrame int    // --max-frame-bytes
	stateDir string // --state-dir
	sweepMs  int64  // --sweep-interval-ms
	// inheritEnv is --inherit-env; inheritEnvOld the old boolean spelling
	// given, if any.
	inheritEnv    string
	inheritEnvOld string
	logLevel      string // --log-level
	printVersion  bool   // --version

	bounds    boundFlags     // timeouts, graces and retries (config.Bounds)
	caps      capFlags       // queue, ask, line, journal and capacity caps (config.Caps)
	isolation isolationFlags // containment, sandbox and egress pins of provider trees
	limits    limitFlags     // the --default-* resource limits (flags_safety.go)
	state     stateFlags     // the portable provider state store (statestore.go)
}

// boundFlags are the flags of a session's time bounds and close retries,
// in milliseconds as given; run turns them into config.Bounds.
type boundFlags struct {
	handshakeMs   int64 // --handshake-timeout-ms
	closeMs       int64 // --close-timeout-ms
	termMs        int64 // --term-grace-ms
	killMs        int64 // --kill-grace-ms
	shutdownMs    int64 // --shutdown-ms (0 given: derived by parseFlags)
	closeAttempts int   // --protocol-close-attempts
	retryMinMs    int64 // --retained-retry-min-ms
	retryMaxMs    int64 // --retained-retry-max-ms
	lateWindowMs  int64 // --retained-close-window-ms
	// lateReconcile is the removed --late-close-reconcile-attempts, still
	// accepted (and ignored, with a warning) so an operator's old command
	// line keeps starting; -1: not given.
	lateReconcile int
}

// capFlags are the flags of the sidecar's caps: queued turns, pending
// asks, provider lines, journal segments and how many sessions and trees
// may live at once; run turns them into config.Caps.
type capFlags struct {
	maxProvLine  int   // --max-provider-line-bytes
	maxQueued    int   // --max-queued-turns
	journalMax   int64 // --journal-max-bytes
	maxAsks      int   // --max-pending-asks
	maxAskBytes  int   // --max-pending-ask-bytes
	stateReadMs  int64 // --state-read-ms
	maxSessions  int   // --max-sessions (0: derived from the descriptor limit)
	maxLiveTrees int   // --max-live-trees (0: maxSessions)
}

// isolationFlags are the flags of how provider trees are contained and
// sandboxed: the containment mode and its cgroup parent, the default
// kernel sandbox, and the egress pins of a sandbox's network allow list.
type isolationFlags struct {
	containment    string // --containment
	cgroupParent   string // --cgroup-parent
	defaultSandbox string // --default-sandbox
	assumeABI      int    // --assume-landlock-abi (-1: the kernel's)
	// pins are the --resolve flags (docs/protocol.md §2, §19.1).
	pins egress.Pins
}
