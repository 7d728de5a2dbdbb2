// Package lifestate is the state machine of a session's life: which
// protocol.SessionState a session is in (docs/protocol.md §6, §24) and the
// only moves between them. It imports protocol for the states and nothing
// of the session (internal/session), the Manager (internal/adapter) or the
// host side; the session's moveTo logs, journals and publishes around
// Machine.Transition.
//
// It is its own package, not part of internal/actor, because it is about
// what a session is (the protocol's lifecycle), where internal/actor is
// machinery that knows nothing of sessions or the protocol.
package lifestate

import (
	"fmt"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// A session's life, after containerd's runc shim (process/init_state.go:
// one state per lifecycle step, an illegal transition is an error). Every
// state a session can be in is a protocol.SessionState; legalMoves lists
// the only moves between them:
//
//	admitting ─► open ◄─► turn            open ─► retiring ─► parked ─► reviving ─► open
//	    │         │ ╲      │ ╲                      │          │   ▲       │  │
//	    │         │  ╲     │  ╲                     ▼          ▼   └───────┘  ▼
//	    ▼         ▼   ▼    ▼   ▼                  closed     closing        closed
//	  closed ◄─ closing   dead ─► closed
//
// admitting → closed is a failed open (its proof answers it); open|turn →
// closing is a close or shutdown; open|turn → dead is the provider exiting
// on its own; dead → closed is a close after that death. A per-turn (or
// idle warm) session retires: open → retiring → parked, and a call that
// needs the agent revives it: parked → reviving → open (docs/protocol.md
// §24); a revive that launched nothing, or failed for a reason worth a
// retry, goes back to parked; one that lost the agent's session, and a
// retire whose tree could not be proven gone, end closed; a parked
// session's close is parked → closing. closed is final.
var legalMoves = map[protocol.SessionState][]protocol.SessionState{
	protocol.StateAdmitting: {protocol.StateOpen, protocol.StateClosed},
	protocol.StateOpen:      {protocol.StateTurn, protocol.StateClosing, protocol.StateDead, protocol.StateRetiring},
	protocol.StateTurn:      {protocol.StateOpen, protocol.StateClosing, protocol.StateDead},
	protocol.StateRetiring:  {protocol.StateParked, protocol.StateClosed},
	protocol.StateParked:    {protocol.StateReviving, protocol.StateClosing},
	protocol.StateReviving:  {protocol.StateOpen, protocol.StateParked, protocol.StateClosed},
	protocol.StateClosing:   {protocol.StateClosed},
	protocol.StateDead:      {protocol.StateClosed},
	protocol.StateClosed:    {},
}

// Machine is a session's state. It is owned by the session's actor (not
// safe for concurrent use); only Transition changes it, so a move the
// table does not allow cannot happen silently. Make one with New.
type Machine struct{ cur protocol.SessionState }

// New returns a Machine in state initial (a session starts
// protocol.StateAdmitting).
func New(initial protocol.SessionState) Machine { return Machine{cur: initial} }

// Current returns the state (as status and list report it).
func (l Machine) Current() protocol.SessionState { return l.cur }

// Is reports whether the state is one of states.
func (l Machine) Is(states ...protocol.SessionState) bool {
	for _, st := range states {
		if l.cur == st {
			return true
		}
	}
	return false
}

// IllegalTransition is the error of a move legalMoves does not allow:
// From is the state the machine stayed in, To the refused target.
type IllegalTransition struct {
	// From is the state the machine stayed in; To is the refused target.
	From, To protocol.SessionState
}

// Error reads "illegal session state transition FROM → TO".
func (e *IllegalTransition) Error() string {
	return fmt.Sprintf("illegal session state transition %s → %s", e.From, e.To)
}

// Transition moves to `to` if legalMoves allows it from the current state;
// otherwise it returns an *IllegalTransition and the state is unchanged.
func (l *Machine) Transition(to protocol.SessionState) error {
	for _, ok := range legalMoves[l.cur] {
		if ok == to {
			l.cur = to
			return nil
		}
	}
	return &IllegalTransition{From: l.cur, To: to}
}
