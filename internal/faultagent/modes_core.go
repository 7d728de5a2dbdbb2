package main

import "time"

// protocolModes are the faults of the ACP handshake and of a session's
// creation and close (see the package doc for each mode).
type protocolModes struct {
	hangInitialize   bool          // hang-initialize
	hangNew          bool          // hang-new
	lateNew          time.Duration // late-new=<ms>
	noSessionID      bool          // no-session-id
	closeUnsupported bool          // close-unsupported
	hangClose        bool          // hang-close
}

// processModes are the faults of the agent process itself: how it dies,
// goes mute, survives SIGTERM or leaves a grandchild behind.
type processModes struct {
	crashMidTurn bool // crash-mid-turn
	muteMidTurn  bool // mute-mid-turn
	ignoreTerm   bool // ignore-term
	grandchild   bool // grandchild
}

// turnModes shape what a turn sends: extra or oversized updates, garbage
// on stdout, a permission ask, a slow answer.
type turnModes struct {
	flood          int           // flood=<N>
	longLine       int           // long-line=<bytes>
	garbageStdout  bool          // garbage-stdout
	permissionKind string        // permission=<kind>
	slowTurn       time.Duration // slow-turn=<ms>
}
