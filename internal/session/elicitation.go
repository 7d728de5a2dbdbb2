package session

import (
	"context"
	"errors"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/policy"
	"github.com/acpx-sidecar/acpx-sidecar/internal/strictjson"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// ElicitationHost is the part of a Host that carries ACP elicitation
// (docs/protocol.md §22). A Host without it declared no elicitation:
// agents are not offered it and their elicitation/create is refused
// -32601.
type ElicitationHost interface {
	// Elicitation is initialize.capabilities.elicitation: the modes the
	// host answers.
	Elicitation() protocol.ElicitationCaps
	// RequestElicitation sends session/elicitation and waits for the
	// host's answer or ctx (the turn's). A ctx ended with cause
	// protocol.ErrWithdrawn (the agent withdrew it) sends the host
	// $/cancelRequest for it.
	RequestElicitation(ctx context.Context, p protocol.ElicitationParams) (protocol.ElicitationResult, error)
}

// elicitCaps returns the elicitation modes the host declared (none for a
// Host without ElicitationHost).
func (m *Shared) elicitCaps() (ElicitationHost, protocol.ElicitationCaps) {
	eh, ok := m.Host.(ElicitationHost)
	if !ok {
		return nil, protocol.ElicitationCaps{}
	}
	return eh, eh.Elicitation()
}

// onElicitation answers an ACP elicitation/create on the actor
// (docs/protocol.md §22): refused -32601 when the host declared no
// elicitation, -32602 when it is malformed or of a mode the host did not
// declare; answered cancel outside a live turn and beyond the turn's
// bound on asks waiting for the host; else put to the host.
func (s *Actor) onElicitation(m *acpclient.AgentMsg) {
	eh, caps := s.m.elicitCaps()
	if !caps.Any() {
		s.refuseElicit(m, &policy.Elicit{}, -32601, "elicitation is not supported by this client", "the host declared no elicitation")
		return
	}
	pe, why := policy.ParseElicitation(m.Params, s.rec.identity.BackendSessionID)
	if m.Malformed != "" {
		why = m.Malformed
	}
	if why != "" {
		if pe == nil {
			pe = &policy.Elicit{}
		}
		s.refuseElicit(m, pe, -32602, "invalid elicitation/create: "+why, "malformed: "+why)
		return
	}
	if !caps.Allows(pe.Mode) {
		s.refuseElicit(m, pe, -32602, "elicitation mode "+protocol.QuoteShort(pe.Mode)+" was not advertised", "mode "+protocol.QuoteShort(pe.Mode)+" not declared by the host")
		return
	}
	t := s.turns.turn
	if t == nil || t.cancelled || !s.state.Is(protocol.StateTurn) {
		s.answerElicit(m, pe, policy.ElicitCancel, "no active turn", nil)
		return
	}
	if maxN, maxB := s.m.maxPendingAsks(); policy.Overflows(t.waitingAsks(), t.pendingBytes, pe.Size, maxN, maxB) {
		s.answerElicit(m, pe, policy.ElicitCancel, policy.OverflowRule(maxN, maxB), nil)
		return
	}
	s.escalateElicit(t, eh, m, pe)
}

// escalateElicit puts the elicitation to the host, bounded by
// elicitationTimeoutMs and the turn, withdrawable by the agent.
func (s *Actor) escalateElicit(t *turn, eh ElicitationHost, m *acpclient.AgentMsg, pe *policy.Elicit) {
	if t.elicits == nil {
		t.elicits = map[*acpclient.AgentMsg]*policy.Elicit{}
	}
	t.elicits[m] = pe
	t.pendingBytes += pe.Size
	rid := t.requestID
	params := protocol.ElicitationParams{Session: s.id, RequestID: &rid, Elicitation: jsonl.CleanRaw(m.Params)}
	s.pub.JournalRequest(protocol.MethodSessionElicitation, params)
	ectx, cancel := context.WithCancelCause(t.ctx)
	bound := time.AfterFunc(s.elicitationTimeout(), func() {
		s.post(func() {
			if s.turns.turn == t && t.elicits[m] != nil {
				s.answerElicit(m, pe, policy.ElicitCancel, "elicitationTimeoutMs", nil)
			}
		})
		cancel(nil) // after the decision is queued
	})
	s.awaitWithdrawal(m.ID, func() {
		if s.turns.turn != t || t.elicits[m] == nil {
			return
		}
		s.dropElicit(m, pe)
		m.Fail(acpclient.CodeRequestCancelled, "request cancelled")
		withdrawHost(cancel)
		s.auditElicit(pe, protocol.ElicitWithdrawn, "agent $/cancel_request", nil)
	})
	go func() {
		res, err := eh.RequestElicitation(ectx, params)
		bound.Stop()
		cancel(nil)
		s.post(func() {
			if s.turns.turn != t || t.elicits[m] == nil {
				return // settled first (turn end, bound, withdrawal): the late answer changes nothing
			}
			var refused *protocol.Error
			switch {
			case errors.As(err, &refused) && refused.RPCCode == protocol.CodeInvalidParams:
				// An answer of the wrong shape (not an object, a member
				// named twice or in another case): refused like a schema
				// mismatch (docs/protocol.md §22).
				s.answerElicit(m, pe, policy.ElicitCancel, "host answer refused", refused)
				return
			case err != nil:
				s.answerElicit(m, pe, policy.ElicitCancel, "host error", nil)
				return
			}
			ans, herr := policy.CheckElicitAnswer(pe, res)
			if herr != nil {
				s.log.Warn("host elicitation answer refused", zap.String("reason", herr.Message))
				s.answerElicit(m, pe, policy.ElicitCancel, "host answer refused", herr)
				return
			}
			s.answerElicit(m, pe, ans, "host", nil)
		})
	}()
}

// dropElicit removes m from its turn's pending elicitations.
func (s *Actor) dropElicit(m *acpclient.AgentMsg, pe *policy.Elicit) {
	if t := s.turns.turn; t != nil {
		if _, ok := t.elicits[m]; ok {
			delete(t.elicits, m)
			t.pendingBytes -= pe.Size
		}
	}
}

// answerElicit answers the agent once with ans and audits it (herr: the
// refusal of the host's answer).
func (s *Actor) answerElicit(m *acpclient.AgentMsg, pe *policy.Elicit, ans policy.ElicitAnswer, rule string, herr *protocol.Error) {
	s.settled(m.ID)
	s.dropElicit(m, pe)
	m.Reply(ans)
	s.auditElicit(pe, ans.Action, rule, herr)
}

// refuseElicit answers the agent with a JSON-RPC error and audits it as
// "refused".
func (s *Actor) refuseElicit(m *acpclient.AgentMsg, pe *policy.Elicit, code int64, message, rule string) {
	s.log.Info("elicitation refused", zap.String("rule", rule))
	m.Fail(code, message)
	s.auditElicit(pe, protocol.ElicitRefused, rule, nil)
}

// auditElicit sends session/elicitationDecided (journaled).
func (s *Actor) auditElicit(pe *policy.Elicit, action protocol.ElicitAction, rule string, herr *protocol.Error) {
	var rid *string
	if s.turns.turn != nil {
		r := s.turns.turn.requestID
		rid = &r
	}
	n := protocol.ElicitationDecided{Session: s.id, RequestID: rid, ElicitationID: pe.ElicitationID, Mode: pe.Mode,
		Action: action, Rule: rule}
	if herr != nil {
		n.Error = herr.Wire()
	}
	s.pub.Notify(protocol.NotifySessionElicitationDecided, n)
}

// cancelElicitations answers the turn's pending elicitations cancel (the
// turn ended or was cancelled: its authority is gone).
func (s *Actor) cancelElicitations(t *turn, rule string) {
	for m, pe := range t.elicits {
		s.answerElicit(m, pe, policy.ElicitCancel, rule, nil)
	}
}

// onElicitationComplete forwards an ACP elicitation/complete as
// session/elicitationComplete to a host that declared url mode.
func (s *Actor) onElicitationComplete(m *acpclient.AgentMsg) {
	if _, caps := s.m.elicitCaps(); !caps.URL || m.Malformed != "" {
		return
	}
	p, why := strictjson.DecodeObject(m.Params, "elicitationId", "_meta")
	if why != "" {
		return
	}
	id, present, ok := p.Str("elicitationId")
	if !ok || !present {
		return
	}
	n := protocol.ElicitationComplete{Session: s.id, ElicitationID: id}
	if meta, ok := p["_meta"]; ok && len(meta) > 0 && meta[0] == '{' {
		n.Meta = jsonl.CleanRaw(meta)
	}
	s.pub.Notify(protocol.NotifySessionElicitationComplete, n)
}

// elicitationTimeout is the bound on one host elicitation: the open's
// elicitationTimeoutMs, else the permission bound (docs/protocol.md §22).
func (s *Actor) elicitationTimeout() time.Duration {
	if p := s.plan.Params.ElicitationTimeoutMs; p != nil {
		return time.Duration(*p) * time.Millisecond
	}
	return s.permissionTimeout()
}

// clientCapabilities are the ACP clientCapabilities sent in initialize:
// no fs/terminal (docs/protocol.md §14) and exactly the elicitation
// modes the host declared (none: no elicitation member).
func (s *Actor) clientCapabilities() acp.ClientCapabilities {
	var cc acp.ClientCapabilities
	if _, caps := s.m.elicitCaps(); caps.Any() {
		cc.Elicitation = &acp.ElicitationCapabilities{}
		if caps.Form {
			cc.Elicitation.Form = &acp.ElicitationFormCapabilities{}
		}
		if caps.URL {
			cc.Elicitation.Url = &acp.ElicitationUrlCapabilities{}
		}
	}
	return cc
}
