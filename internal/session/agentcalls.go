package session

import (
	"context"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// onAgentMsg handles an acpclient.AgentMsg on the actor.
func (s *Actor) onAgentMsg(m *acpclient.AgentMsg) {
	switch m.Method {
	case acpclient.MethodElicitationCreate:
		s.onElicitation(m)
	case acpclient.MethodElicitationComplete:
		s.onElicitationComplete(m)
	case acpclient.MethodCancelRequest:
		if id := m.CancelledID(); id != "" {
			s.withdraw(id)
		}
	}
}

// awaitWithdrawal registers what withdraws the host-bound request the
// agent's request id stands for (a permission, an elicitation, …): the
// agent's $/cancel_request {requestId: id} runs it once. Whoever answers
// the agent otherwise calls settled(id) first.
func (s *Actor) awaitWithdrawal(id string, withdraw func()) {
	if id == "" {
		return
	}
	if s.turns.withdrawable == nil {
		s.turns.withdrawable = map[string]func(){}
	}
	s.turns.withdrawable[id] = withdraw
}

// settled forgets the withdrawal of the agent's request id: it was
// answered.
func (s *Actor) settled(id string) { delete(s.turns.withdrawable, id) }

// withdraw runs the withdrawal registered for the agent's request id
// (docs/protocol.md §22 Withdrawn requests): the agent is answered
// -32800, the host's copy is cancelled ($/cancelRequest) and the
// withdrawal audited. Unknown ids (answered already, never put to the
// host) are ignored.
func (s *Actor) withdraw(id string) {
	f := s.turns.withdrawable[id]
	if f == nil {
		return
	}
	delete(s.turns.withdrawable, id)
	s.log.Info("the agent withdrew a request put to the host")
	f()
}

// withdrawHost ends the host's copy of a withdrawn request: cancel ends
// its context with protocol.ErrWithdrawn, which makes the host
// connection send $/cancelRequest for it.
func withdrawHost(cancel context.CancelCauseFunc) { cancel(protocol.ErrWithdrawn) }
