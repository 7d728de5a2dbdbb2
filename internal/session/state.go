package session

import (
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/lifestate"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// stateMachine is a session's state: the state machine of its life
// (internal/lifestate, after containerd's runc shim), read here by the
// names the actor's code uses. It is actor-owned; only moveTo changes it.
type stateMachine struct{ m lifestate.Machine }

// current returns the state (as status and list report it).
func (l stateMachine) current() protocol.SessionState { return l.m.Current() }

// is reports whether the state is one of states.
func (l stateMachine) is(states ...protocol.SessionState) bool { return l.m.Is(states...) }

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
	if err := s.state.m.Transition(to); err != nil {
		if strictTransitions {
			panic(err)
		}
		s.log.Error("session state transition refused (a bug)", zap.Error(err))
	}
	s.publish() // session/list sees every state as it is entered
}
