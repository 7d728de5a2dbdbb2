package session

import (
	"fmt"

	"go.uber.org/zap"

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

// stateMachine is a session's state. It is actor-owned; only transition
// changes it, so a move the table does not allow cannot happen silently.
type stateMachine struct{ cur protocol.SessionState }

// current returns the state (as status and list report it).
func (l stateMachine) current() protocol.SessionState { return l.cur }

// is reports whether the state is one of states.
func (l stateMachine) is(states ...protocol.SessionState) bool {
	for _, st := range states {
		if l.cur == st {
			return true
		}
	}
	return false
}

// illegalTransition is the error of a move legalMoves does not allow.
type illegalTransition struct{ from, to protocol.SessionState }

func (e *illegalTransition) Error() string {
	return fmt.Sprintf("illegal session state transition %s → %s", e.from, e.to)
}

// transition moves to `to` if legalMoves allows it from the current state;
// otherwise it returns an *illegalTransition and the state is unchanged.
func (l *stateMachine) transition(to protocol.SessionState) error {
	for _, ok := range legalMoves[l.cur] {
		if ok == to {
			l.cur = to
			return nil
		}
	}
	return &illegalTransition{from: l.cur, to: to}
}

// strictTransitions makes an illegal transition panic. It is false in
// production, where the move is refused and logged at error level (the
// state stays what it was: a bug must not reopen a closed session, and a
// panic would take every other session's cleanup down with it); the
// package's tests set it (state_test.go), so a bug fails the test that
// hits it.
var strictTransitions = false

// moveTo makes the transition to `to` on the actor; an illegal one is a
// bug, handled as strictTransitions says.
func (s *Actor) moveTo(to protocol.SessionState) {
	if err := s.state.transition(to); err != nil {
		if strictTransitions {
			panic(err)
		}
		s.log.Error("session state transition refused (a bug)", zap.Error(err))
	}
	s.publish() // session/list sees every state as it is entered
}
