package session

import (
	"encoding/json"
	"errors"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/egress"
	"github.com/acpx-sidecar/acpx-sidecar/internal/egress/allow"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// sessionEgress is the session's allow-list network (actor-owned; the
// Network itself is safe to close from the cleanup worker): made at the
// first launch, joined by every tree the session launches (a revive's
// too), closed once the session ends with its tree proven gone.
type sessionEgress struct {
	net *egress.Network
	// closed: the network was closed; the session makes no other.
	closed bool
	// dropped: the audit entries dropped so far that the log has said.
	dropped uint64
}

// refuseAllow is the open's error for an allow list this sidecar cannot
// enforce (nil when it can): PLATFORM_UNSUPPORTED, nothing launched.
func (m *Shared) refuseAllow() *protocol.Error {
	if err := m.Config.Egress.Unsupported; err != nil {
		return protocol.Domain(protocol.ErrPlatformUnsupported, "sandbox.network.allow cannot be enforced here: "+err.Error(), false)
	}
	return nil
}

// joinEgress returns the descriptor of the session's network namespace
// for list (made on the first call: egress.New), for the launcher to
// join, and the list as the network enforces it. Errors:
// PLATFORM_UNSUPPORTED when the namespace cannot be made, retryable
// ACPX_SESSION_ENSURE_FAILED for another failure of its set-up (a
// listener that could not bind); nothing is left behind.
func (s *Actor) joinEgress(list []string) (int, allow.List, *protocol.Error) {
	if s.egr.net != nil {
		return s.egr.net.NetNSFD(), s.egr.net.Allow(), nil
	}
	parsed, err := allow.ParseList(list) // validated at the open: cannot fail here
	if err != nil {
		return -1, nil, protocol.InvalidParams("sandbox.network.allow", err.Error())
	}
	maxConns := egress.DefaultMaxConns
	if l := s.plan.Params.Limits; l != nil && l.Connections != nil {
		maxConns = int(*l.Connections)
	}
	n, err := egress.New(egress.Config{Allow: parsed, Pins: s.m.Config.Egress.Pins, MaxConns: maxConns,
		ResolvConf: s.m.Config.Egress.ResolvConf, Shared: s.m.NetTotals, Budget: s.m.NetBudget,
		Wake: func() { s.post(s.takeNetworkEvents) }})
	if errors.Is(err, egress.ErrUnsupported) {
		return -1, nil, protocol.Domain(protocol.ErrPlatformUnsupported, "the session's network namespace could not be made: "+s.red.Clean(err.Error()), false)
	}
	if err != nil {
		return -1, nil, protocol.Domain(protocol.ErrEnsureFailed, "the session's network namespace could not be set up: "+s.red.Clean(err.Error()), true)
	}
	s.egr.net = n
	return n.NetNSFD(), parsed, nil
}

// takeNetworkEvents sends the audit entries the session's network queued
// as `session/network` notifications, journaled (on the actor).
func (s *Actor) takeNetworkEvents() {
	evs := s.egr.net.TakeEvents()
	if len(evs) == 0 {
		return
	}
	for _, ev := range evs {
		// A name comes lower-cased: its secrets are matched in any case.
		n := protocol.NetworkNotice{Session: s.id, SessionKey: s.key, Destination: s.red.CleanFold(ev.Destination),
			Decision: protocol.NetworkDecision(ev.Decision), Reason: ev.Reason, BytesOut: ev.BytesOut, BytesIn: ev.BytesIn, Ms: ev.Ms}
		if ev.RequestID != "" {
			rid := ev.RequestID
			n.RequestID = &rid
		}
		raw, err := json.Marshal(n)
		if err != nil {
			s.log.Error("session/network not encodable (a bug)", zap.Error(err))
			continue
		}
		s.pub.Emit(protocol.NotifySessionNetwork, raw)
	}
	s.pub.Flush()
	if d := s.egr.net.Dropped(); d > s.egr.dropped {
		s.log.Warn("session/network entries dropped: the session did not take them in time", zap.Uint64("dropped", d-s.egr.dropped))
		s.egr.dropped = d
	}
}

// networkTurn tells the session's network which turn runs ("" none).
func (s *Actor) networkTurn(requestID string) { s.egr.net.SetTurn(requestID) }

// endNetwork closes the session's network once its tree is proven gone
// (on the actor): its last connections' entries are sent first.
func (s *Actor) endNetwork() {
	if s.egr.net == nil || s.egr.closed {
		return
	}
	s.egr.closed = true
	s.egr.net.Close()
	s.takeNetworkEvents()
}

// networkStatus is session/status `network`: nil without an allow list.
func (s *Actor) networkStatus() *protocol.NetworkTotals {
	if s.egr.net == nil {
		return nil
	}
	t := protocol.NetworkTotals(s.egr.net.Totals())
	return &t
}
