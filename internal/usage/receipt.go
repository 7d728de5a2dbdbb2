package usage

import (
	"encoding/json"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Usage an agent reports on its own extension (docs/protocol.md §24,
// "Effort, thinking and policy breaches": usage receipts): Grok sends a
// whole prompt's usage and cost on `_x.ai/session_notification` with
// update.sessionUpdate "turn_completed" (xai-org/grok-build,
// extensions/notification.rs: PromptUsage). The sidecar takes it as the
// turn's usage and cost (basis "turn") only when it arrives live (not
// replayed), for this session's ACP session, within the turn whose prompt
// was sent, once per turn, with token fields that add up; anything else is
// logged and left out of the accounting.

// usdTicksPerUSD: Grok's costUsdTicks are 1e10 per dollar.
const usdTicksPerUSD = 1e10

// Receipt is a turn's accepted usage receipt: Usage in tokens, and Cost
// (USD, basis "turn") nil when the agent sent no trustworthy cost.
type Receipt struct {
	// Usage is the turn's token counts.
	Usage protocol.Usage
	// Cost is the turn's cost in USD, basis "turn"; nil when the agent
	// sent no trustworthy cost.
	Cost *protocol.Cost
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

// ParseReceipt checks one notification's params for the ACP session
// backendSessionID: the receipt, or nil and why says what was wrong, or
// nil and why "" for an update of another kind (not a receipt at all).
// Cached reads, cache creation and reasoning tokens become
// cachedReadTokens, cachedWriteTokens and thoughtTokens when positive;
// costUsdTicks (1e10 per USD) becomes the cost when present, not negative
// and not partial.
func ParseReceipt(params json.RawMessage, backendSessionID string) (*Receipt, string) {
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
	r := &Receipt{Usage: protocol.Usage{InputTokens: *u.InputTokens, OutputTokens: *u.OutputTokens, TotalTokens: *u.TotalTokens}}
	if u.CachedReadTokens > 0 {
		v := u.CachedReadTokens
		r.Usage.CachedReadTokens = &v
	}
	if u.CacheCreationTokens > 0 {
		v := u.CacheCreationTokens
		r.Usage.CachedWriteTokens = &v
	}
	if u.ReasoningTokens > 0 {
		v := u.ReasoningTokens
		r.Usage.ThoughtTokens = &v
	}
	if u.CostUsdTicks != nil && *u.CostUsdTicks >= 0 && !u.CostIsPartial {
		r.Cost = &protocol.Cost{Amount: float64(*u.CostUsdTicks) / usdTicksPerUSD, Currency: "USD", Basis: protocol.CostTurn}
	}
	return r, ""
}

// TurnReceipts is one turn's usage receipts: the one accepted and how
// many arrived. The zero value is a turn with none.
type TurnReceipts struct {
	accepted *Receipt
	n        int
}

// Offer counts one receipt notification of the turn, as ParseReceipt
// gave it (r, why), and reports why it is not accepted ("" when it is):
// ParseReceipt's why, "outside a turn" when the turn is not live (not
// running, or a replay), "a second receipt in one turn" after the first.
// A refused receipt after another discards the accepted one too: two
// receipts for one turn, neither is trusted.
func (t *TurnReceipts) Offer(r *Receipt, why string, live bool) string {
	switch {
	case why != "":
	case !live:
		why = "outside a turn"
	case t.n > 0:
		why = "a second receipt in one turn"
	}
	if why == "" {
		t.accepted = r
	}
	t.n++
	if why != "" && t.n > 1 {
		t.accepted = nil
	}
	return why
}

// Accepted is the turn's receipt: the accepted one when exactly one
// arrived, else nil.
func (t *TurnReceipts) Accepted() *Receipt {
	if t.n != 1 {
		return nil
	}
	return t.accepted
}
