package session

import (
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

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
	if err := s.state.Transition(to); err != nil {
		if strictTransitions {
			panic(err)
		}
		s.log.Error("session state transition refused (a bug)", zap.Error(err))
	}
	s.publish() // session/list sees every state as it is entered
}
