package session

import (
	"encoding/json"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Usage an agent reports on its own extension (docs/protocol.md §24;
// PROTOCOL §10.5): Grok sends a whole prompt's usage and cost on
// `_x.ai/session_notification` with update.sessionUpdate "turn_completed"
// (xai-org/grok-build, extensions/notification.rs: PromptUsage). The
// sidecar takes it as the turn's usage and cost (basis "turn") only when
// it arrives live (not replayed), for this session's ACP session, within
// the turn whose prompt was sent, once per turn, with token fields that
// add up; anything else is logged and left out of the accounting.

// usdTicksPerUSD: Grok's costUsdTicks are 1e10 per dollar.
const usdTicksPerUSD = 1e10

// turnReceipt is a turn's accepted usage receipt.
type turnReceipt struct {
	usage protocol.Usage
	cost  *protocol.Cost // nil when the agent sent no trustworthy cost
}

// receiptNotice is the part of a usage notification the sidecar reads.
type receiptNotice struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		Kind  string        `json:"sessionUpdate"`
		Usage *receiptUsage `json:"usage"`
	} `json:"update"`
	Meta struct {
		IsReplay bool `json:"isReplay"`
	} `json:"_meta"`
}

// receiptUsage is Grok's PromptUsage totals.
type receiptUsage struct {
	InputTokens         *int64 `json:"inputTokens"`
	OutputTokens        *int64 `json:"outputTokens"`
	TotalTokens         *int64 `json:"totalTokens"`
	CachedReadTokens    int64  `json:"cachedReadTokens"`
	CacheCreationTokens int64  `json:"cacheCreationTokens"`
	ReasoningTokens     int64  `json:"reasoningTokens"`
	CostUsdTicks        *int64 `json:"costUsdTicks"`
	CostIsPartial       bool   `json:"costIsPartial"`
	UsageIsIncomplete   bool   `json:"usageIsIncomplete"`
}

// parseReceipt checks one notification's params; why says what was wrong
// (receipt nil), or receipt is nil and why "" for an update of another
// kind.
func parseReceipt(params json.RawMessage, backendSessionID string) (*turnReceipt, string) {
	var n receiptNotice
	if json.Unmarshal(params, &n) != nil {
		return nil, "not a session notification"
	}
	if n.Update.Kind != "turn_completed" {
		return nil, ""
	}
	u := n.Update.Usage
	switch {
	case n.Meta.IsReplay:
		return nil, "replayed, not live"
	case n.SessionID != backendSessionID:
		return nil, "for another ACP session"
	case u == nil:
		return nil, "no usage"
	case u.UsageIsIncomplete:
		return nil, "usage marked incomplete"
	case u.InputTokens == nil || u.OutputTokens == nil || u.TotalTokens == nil:
		return nil, "token fields missing"
	case *u.InputTokens < 0 || *u.OutputTokens < 0 || u.CachedReadTokens < 0 || u.CacheCreationTokens < 0 || u.ReasoningTokens < 0:
		return nil, "negative token counts"
	case *u.TotalTokens != *u.InputTokens+*u.OutputTokens:
		return nil, "totalTokens is not inputTokens + outputTokens"
	case u.CachedReadTokens+u.CacheCreationTokens > *u.InputTokens:
		return nil, "cached tokens exceed inputTokens"
	}
	r := &turnReceipt{usage: protocol.Usage{InputTokens: *u.InputTokens, OutputTokens: *u.OutputTokens, TotalTokens: *u.TotalTokens}}
	if u.CachedReadTokens > 0 {
		v := u.CachedReadTokens
		r.usage.CachedReadTokens = &v
	}
	if u.CacheCreationTokens > 0 {
		v := u.CacheCreationTokens
		r.usage.CachedWriteTokens = &v
	}
	if u.ReasoningTokens > 0 {
		v := u.ReasoningTokens
		r.usage.ThoughtTokens = &v
	}
	if u.CostUsdTicks != nil && *u.CostUsdTicks >= 0 && !u.CostIsPartial {
		r.cost = &protocol.Cost{Amount: float64(*u.CostUsdTicks) / usdTicksPerUSD, Currency: "USD", Basis: protocol.CostTurn}
	}
	return r, ""
}

// onReceipt takes a usage notification of the profile's UsageReceipt
// method as the active turn's, if it qualifies (see above).
func (s *Actor) onReceipt(params json.RawMessage) {
	r, why := parseReceipt(params, s.rec.identity.BackendSessionID)
	if r == nil && why == "" {
		return
	}
	t := s.turns.turn
	switch {
	case why != "":
	case s.turns.replaying || !s.state.is(protocol.StateTurn) || t == nil:
		why = "outside a turn"
	case t.receipts > 0:
		why = "a second receipt in one turn"
	}
	if t != nil && why == "" {
		t.receipt = r
	}
	if t != nil && s.turns.turn == t {
		t.receipts++
	}
	if why != "" {
		if t != nil && t.receipts > 1 {
			t.receipt = nil // two receipts for one turn: neither is trusted
		}
		s.log.Info("usage receipt not accepted", zap.String("why", why))
	}
}
