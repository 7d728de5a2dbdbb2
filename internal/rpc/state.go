package rpc

import (
	"context"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// phase is where the connection is in the lifecycle (docs/protocol.md §4). It
// only moves forward: new → ready (initialize) → shutdown (shutdown, exit,
// stdin EOF, Stop).
type phase int

const (
	phaseNew phase = iota
	phaseReady
	phaseShutdown
)

// connState is everything about the connection that goroutines other than
// the read loop also read or change (replies, request goroutines, Stop,
// the session actors asking PermissionRequests). It is touched only inside
// Server.update, the one mutator, as jsonrpc2_v2's Conn keeps its
// inFlightState behind updateInFlight.
type connState struct {
	phase     phase
	hostPerms bool // capabilities.permissionRequests of initialize
	hostExt   bool // capabilities.extRequests of initialize (ext.go)
	// hostElicit: capabilities.elicitation of initialize.
	hostElicit protocol.ElicitationCaps
	// inflight holds the ids (idKey) of requests not yet answered.
	inflight map[string]bool
	// pending holds the cancel funcs of answerable-later requests whose
	// backend call takes a ctx, by id, for $/cancelRequest.
	pending map[string]context.CancelFunc
	// shutdownOK: shutdown finished with every proof complete.
	shutdownOK bool
}

func newConnState() connState {
	return connState{inflight: map[string]bool{}, pending: map[string]context.CancelFunc{}}
}

// update runs f with the connection state locked. f must not block or call
// back into the Server.
func (s *Server) update(f func(st *connState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.st)
}

// readState returns get's value of the connection state, read under the
// lock: the one getter of the phase and of what the host declared.
func readState[T any](s *Server, get func(st *connState) T) T {
	var v T
	s.update(func(st *connState) { v = get(st) })
	return v
}

// currentPhase returns the lifecycle phase now.
func (s *Server) currentPhase() phase {
	return readState(s, func(st *connState) phase { return st.phase })
}

// advance moves the phase forward to p; it never moves it back (an
// initialize racing Stop does not reopen a connection shutting down).
func (st *connState) advance(p phase) {
	if p > st.phase {
		st.phase = p
	}
}
