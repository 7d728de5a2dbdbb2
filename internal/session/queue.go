package session

import (
	"context"
	"encoding/json"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Queued turns (docs/protocol.md §8 session/prompt, Queued turns): a
// prompt with `queue: true` that arrives while a turn runs waits in the
// session actor's queue, in arrival order, at most config.Config.Caps.MaxQueuedTurns;
// when the active turn is answered, the oldest queued one starts (its
// timeoutMs counts from then). A queued turn never reaches the agent
// unless it starts: cancelled (session/cancel naming it, or its
// $/cancelRequest) it is answered status "cancelled", stopReason
// "cancelled"; when the session closes (host close, shutdown) every
// queued turn is answered the same; when the provider dies, status
// "failed" with PROVIDER_PROCESS_LOST; when the sidecar stops, "failed"
// with SHUTTING_DOWN.

// queuedTurn is one prompt waiting behind the active turn.
type queuedTurn struct {
	ctx      context.Context
	p        protocol.PromptParams
	prompt   json.RawMessage
	reply    Reply
	stopHost func() bool // stops the $/cancelRequest hook while queued
}

// maxQueuedTurns is the queue bound in force.
func (m *Shared) maxQueuedTurns() int {
	switch {
	case m.Config.Caps.MaxQueuedTurns > 0:
		return m.Config.Caps.MaxQueuedTurns
	case m.Config.Caps.MaxQueuedTurns < 0:
		return 0
	}
	return protocol.DefaultMaxQueuedTurns
}

// enqueue puts an admitted prompt behind the active turn.
func (s *Actor) enqueue(ctx context.Context, p protocol.PromptParams, prompt json.RawMessage, reply Reply) {
	q := &queuedTurn{ctx: ctx, p: p, prompt: prompt, reply: reply}
	rid := p.RequestID
	q.stopHost = context.AfterFunc(ctx, func() {
		s.post(func() { s.cancelQueued(rid) })
	})
	s.turns.queue = append(s.turns.queue, q)
	s.m.Stats.Queued(1)
}

// cancelQueued answers the queued turn requestID names "cancelled" and
// drops it; false if no queued turn has that id.
func (s *Actor) cancelQueued(requestID string) bool {
	for i, q := range s.turns.queue {
		if q.p.RequestID == requestID {
			s.turns.queue = append(s.turns.queue[:i], s.turns.queue[i+1:]...)
			s.answerQueued(q, protocol.PromptResult{Status: protocol.TurnCancelled, StopReason: protocol.StopCancelled})
			return true
		}
	}
	return false
}

// answerQueued answers a queued turn that never started.
func (s *Actor) answerQueued(q *queuedTurn, res protocol.PromptResult) {
	q.stopHost()
	s.m.Stats.Queued(-1)
	res.RequestID = q.p.RequestID
	s.m.Stats.CountTurn(res.Status)
	s.pub.Flush()
	q.reply(res, nil)
}

// endQueued answers every queued turn with res, oldest first.
func (s *Actor) endQueued(res protocol.PromptResult) {
	queue := s.turns.queue
	s.turns.queue = nil
	for _, q := range queue {
		s.answerQueued(q, res)
	}
}

// startQueued starts the oldest queued turn when the session is open and
// idle (the connection not lost: the provider's exit answers the queue).
func (s *Actor) startQueued() {
	if s.turns.turn != nil || len(s.turns.queue) == 0 || !s.state.Is(protocol.StateOpen) || s.turns.lostInTurn {
		return
	}
	q := s.turns.queue[0]
	s.turns.queue = s.turns.queue[1:]
	q.stopHost()
	s.m.Stats.Queued(-1)
	s.beginTurn(q.ctx, q.p, q.prompt, q.reply)
}

// queuedIDs lists the queued turns' request ids in the order they will
// run (session/status queuedRequestIds).
func (s *Actor) queuedIDs() []string {
	ids := make([]string, 0, len(s.turns.queue))
	for _, q := range s.turns.queue {
		ids = append(ids, q.p.RequestID)
	}
	return ids
}
