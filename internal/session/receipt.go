package session

import (
	"encoding/json"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/usage"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// onReceipt takes a usage notification of the profile's UsageReceipt
// method as the active turn's, if it qualifies (internal/usage:
// ParseReceipt, TurnReceipts.Offer).
func (s *Actor) onReceipt(params json.RawMessage) {
	r, why := usage.ParseReceipt(params, s.rec.identity.BackendSessionID)
	if r == nil && why == "" {
		return
	}
	if t := s.turns.turn; t != nil {
		why = t.receipts.Offer(r, why, !s.turns.replaying && s.state.Is(protocol.StateTurn))
	} else if why == "" {
		why = "outside a turn"
	}
	if why != "" {
		s.log.Info("usage receipt not accepted", zap.String("why", why))
	}
}
