package session

import (
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/lifestate"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Every test of this package runs with strict transitions: an illegal
// session state move panics instead of being logged and refused.
func init() { strictTransitions = true }

// TestState_StrictTransitionPanics: under test an illegal move panics, so
// a bug in the actor fails the test that hits it (here reopening a closed
// session, which docs/rules.md#r25 and #r26 rule out).
func TestState_StrictTransitionPanics(t *testing.T) {
	s := &Actor{state: lifestate.New(protocol.StateClosed)}
	defer func() {
		if recover() == nil {
			t.Fatal("closed → open did not panic under strictTransitions")
		}
	}()
	s.moveTo(protocol.StateOpen)
}
