package lifestate

import (
	"errors"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

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
			l := New(from)
			err := l.Transition(to)
			if legal[[2]protocol.SessionState{from, to}] {
				if err != nil || l.Current() != to {
					t.Errorf("%s → %s refused: %v", from, to, err)
				}
				continue
			}
			var it *IllegalTransition
			if !errors.As(err, &it) || l.Current() != from {
				t.Errorf("%s → %s: err %v, state %s; want refused and unchanged", from, to, err, l.Current())
			}
		}
	}
}
