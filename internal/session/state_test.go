package session

import (
	"errors"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Every test of this package runs with strict transitions: an illegal
// session state move panics instead of being logged and refused.
func init() { strictTransitions = true }

// TestState_OnlyLegalTransitions: the session lifecycle moves only along
// legalMoves; an illegal move is an error and leaves the state unchanged:
// one turn at a time (open ⇄ turn, docs/rules.md#r27), a dead session is
// never usable again (docs/rules.md#r28), closed is final, and only an
// idle open session retires, only a parked one revives (docs/protocol.md
// §24).
func TestState_OnlyLegalTransitions(t *testing.T) {
	all := []protocol.SessionState{protocol.StateAdmitting, protocol.StateOpen, protocol.StateTurn,
		protocol.StateClosing, protocol.StateClosed, protocol.StateDead,
		protocol.StateRetiring, protocol.StateParked, protocol.StateReviving}
	legal := map[[2]protocol.SessionState]bool{
		{protocol.StateAdmitting, protocol.StateOpen}:   true,
		{protocol.StateAdmitting, protocol.StateClosed}: true,
		{protocol.StateOpen, protocol.StateTurn}:        true,
		{protocol.StateOpen, protocol.StateClosing}:     true,
		{protocol.StateOpen, protocol.StateDead}:        true,
		{protocol.StateTurn, protocol.StateOpen}:        true,
		{protocol.StateTurn, protocol.StateClosing}:     true,
		{protocol.StateTurn, protocol.StateDead}:        true,
		{protocol.StateClosing, protocol.StateClosed}:   true,
		{protocol.StateDead, protocol.StateClosed}:      true,
		{protocol.StateOpen, protocol.StateRetiring}:    true,
		{protocol.StateRetiring, protocol.StateParked}:  true,
		{protocol.StateRetiring, protocol.StateClosed}:  true,
		{protocol.StateParked, protocol.StateReviving}:  true,
		{protocol.StateParked, protocol.StateClosing}:   true,
		{protocol.StateReviving, protocol.StateOpen}:    true,
		{protocol.StateReviving, protocol.StateParked}:  true,
		{protocol.StateReviving, protocol.StateClosed}:  true,
	}
	for _, from := range all {
		for _, to := range all {
			l := stateMachine{from}
			err := l.transition(to)
			if legal[[2]protocol.SessionState{from, to}] {
				if err != nil || l.current() != to {
					t.Errorf("%s → %s refused: %v", from, to, err)
				}
				continue
			}
			var it *illegalTransition
			if !errors.As(err, &it) || l.current() != from {
				t.Errorf("%s → %s: err %v, state %s; want refused and unchanged", from, to, err, l.current())
			}
		}
	}
}

// TestState_StrictTransitionPanics: under test an illegal move panics, so
// a bug in the actor fails the test that hits it (here reopening a closed
// session, which docs/rules.md#r25 and #r26 rule out).
func TestState_StrictTransitionPanics(t *testing.T) {
	s := &Actor{state: stateMachine{protocol.StateClosed}}
	defer func() {
		if recover() == nil {
			t.Fatal("closed → open did not panic under strictTransitions")
		}
	}()
	s.moveTo(protocol.StateOpen)
}
