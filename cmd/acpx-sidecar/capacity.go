package main

import (
	"fmt"
	"syscall"
)

// Capacity (docs/protocol.md §21, docs/operations.md "Capacity"): at start
// the sidecar raises its RLIMIT_NOFILE soft limit to the hard one, and
// --max-sessions, when not given, is derived from the resulting
// descriptor limit.

// fdReserve is the descriptors kept for the sidecar itself (stdio, logs,
// the supervisor, store directories, session/events readers) before any
// are counted for sessions.
const fdReserve = 32

// fdsPerSession is what one live session costs in the sidecar's
// descriptors, with room to spare: the provider's stdin, stdout and
// stderr pipes, its pidfd, its guardian's pipe, the key's lock file, the
// journal's live segment, and one for a record or ledger write in flight
// (about 6 measured on Linux; docs/operations.md "Capacity").
const fdsPerSession = 8

// raiseNofile raises the RLIMIT_NOFILE soft limit to the hard one (when it
// is below it) and returns the soft limit in force after. Go's runtime
// already raises it at start on Linux and restores the original soft
// limit for the processes it launches; Setrlimit is called only when the
// soft limit is still below the hard one (it would make providers inherit
// the raised limit). An error leaves the limit as it was.
func raiseNofile() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return uint64(lim.Cur), err
		}
		lim = raised
	}
	return uint64(lim.Cur), nil
}

// fdsPerConnection is what one connection forwarded through an allow list
// costs in the sidecar's descriptors: the tree's socket, the sidecar's
// own, and the two pipes of the kernel splice (one per direction).
const fdsPerConnection = 6

// maxConnectionsFor is the sidecar-wide bound on forwarded connections
// for a descriptor limit of nofile: a quarter of the descriptors after
// fdReserve, at least 16 (docs/protocol.md §19.1, §21).
func maxConnectionsFor(nofile uint64) int {
	n := 16
	if nofile > fdReserve {
		n = max(n, int((nofile-fdReserve)/4/fdsPerConnection))
	}
	return n
}

// maxSessionsFor is the default --max-sessions for a descriptor limit of
// nofile: (nofile − fdReserve) / fdsPerSession, at least 1, at most
// maxDerivedSessions.
func maxSessionsFor(nofile uint64) int {
	if nofile <= fdReserve+fdsPerSession {
		return 1
	}
	n := (nofile - fdReserve) / fdsPerSession
	if n > maxDerivedSessions {
		n = maxDerivedSessions
	}
	return int(n)
}

// maxDerivedSessions caps the derived default (an unlimited descriptor
// limit is not a promise of memory): 100000 sessions.
const maxDerivedSessions = 100000

// checkMaxSessions validates --max-sessions: 0 (derive it) or positive.
func checkMaxSessions(n int) error {
	if n < 0 {
		return fmt.Errorf("--max-sessions must be 0 (derived from the descriptor limit) or positive")
	}
	return nil
}
