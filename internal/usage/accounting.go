package usage

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Accounting is a session's usage and cost (docs/protocol.md §8
// "session/status" `usage` and `cost`): token counts cumulative and per
// request id, the last cumulative cost the agent reported, and its last
// context-window report (tokens). The zero value is an empty accounting.
type Accounting struct {
	usage        protocol.Usage
	perRequest   map[string]protocol.Usage
	cost         *protocol.Cost
	contextUsage *protocol.ContextUsage
}

// ReportedCost is ACP usage_update's `cost`: the session's cumulative cost
// so far, Amount in units of Currency (an ISO code such as "USD").
type ReportedCost struct {
	// Amount is ACP cost.amount, in units of Currency (not minor units).
	Amount float64 `json:"amount"`
	// Currency is ACP cost.currency, an ISO 4217 code such as "USD".
	Currency string `json:"currency"`
}

// AddTurn adds a finished turn's usage: kept per request id (replacing
// any earlier of that id), and its input, output and total tokens added
// to the cumulative usage (cached and thought tokens are not summed).
func (a *Accounting) AddTurn(requestID string, u protocol.Usage) {
	if a.perRequest == nil {
		a.perRequest = map[string]protocol.Usage{}
	}
	a.perRequest[requestID] = u
	a.usage.InputTokens += u.InputTokens
	a.usage.OutputTokens += u.OutputTokens
	a.usage.TotalTokens += u.TotalTokens
}

// UsageUpdate keeps an ACP usage_update: cost (nil: none reported) becomes
// the cumulative cost (basis "session-cumulative"); used and size (tokens
// of the context window) are kept only when both are present and not
// negative.
func (a *Accounting) UsageUpdate(cost *ReportedCost, used, size *int64) {
	if cost != nil {
		a.cost = &protocol.Cost{Amount: cost.Amount, Currency: cost.Currency, Basis: protocol.CostSessionCumulative}
	}
	if used != nil && size != nil && *used >= 0 && *size >= 0 {
		a.contextUsage = &protocol.ContextUsage{Used: *used, Size: *size}
	}
}

// Cost is the last cumulative cost reported (basis "session-cumulative"),
// nil when none was; the caller must not change it.
func (a *Accounting) Cost() *protocol.Cost { return a.cost }

// CostAmount is the cumulative cost's amount, 0 when none was reported: a
// turn's base for TurnCost.
func (a *Accounting) CostAmount() float64 {
	if a.cost == nil {
		return 0
	}
	return a.cost.Amount
}

// TurnCost is a turn's cost (basis "turn") from the session's cumulative
// cost c and base, the cumulative amount when the turn began: how much it
// grew, or c's whole amount when it went down (the agent restarted its
// count, e.g. a new provider process after resume; docs/protocol.md §8
// "session/prompt" `cost`).
func TurnCost(c ReportedCost, base float64) *protocol.Cost {
	delta := c.Amount - base
	if delta < 0 {
		delta = c.Amount
	}
	return &protocol.Cost{Amount: delta, Currency: c.Currency, Basis: protocol.CostTurn}
}

// Restore loads usage, cost and context usage from a resumed record; what
// the record lacks is left as it was.
func (a *Accounting) Restore(r *store.Record) {
	if u := r.CumulativeTokenUsage; u != nil {
		a.usage = fromTokenUsage(*u)
	}
	if a.perRequest == nil && len(r.RequestTokenUsage) > 0 {
		a.perRequest = map[string]protocol.Usage{}
	}
	for id, u := range r.RequestTokenUsage {
		a.perRequest[id] = fromTokenUsage(u)
	}
	if c := r.CumulativeCost; c != nil {
		a.cost = &protocol.Cost{Amount: c.Amount, Currency: c.Currency, Basis: protocol.CostSessionCumulative}
	}
	if c := r.Acpx.ContextUsage; c != nil {
		a.contextUsage = &protocol.ContextUsage{Used: c.Used, Size: c.Size}
	}
}

// ToRecord writes usage, cost and context usage into r (Restore reads
// them back): the cumulative usage always, per-request usage merged into
// the record's, cost and context usage when known.
func (a *Accounting) ToRecord(r *store.Record) {
	cu := toTokenUsage(a.usage)
	r.CumulativeTokenUsage = &cu
	if r.RequestTokenUsage == nil {
		r.RequestTokenUsage = map[string]store.TokenUsage{}
	}
	for id, u := range a.perRequest {
		r.RequestTokenUsage[id] = toTokenUsage(u)
	}
	if a.cost != nil {
		r.CumulativeCost = &store.Cost{Amount: a.cost.Amount, Currency: a.cost.Currency}
	}
	if c := a.contextUsage; c != nil {
		r.Acpx.ContextUsage = &store.ContextUsage{Used: c.Used, Size: c.Size}
	}
}

// Status is session/status `usage`, a copy (it may outlive this turn of
// the actor loop); PerRequest is never nil.
func (a *Accounting) Status() protocol.UsageStatus {
	us := protocol.UsageStatus{Cumulative: a.usage, PerRequest: make(map[string]protocol.Usage, len(a.perRequest)), Context: a.contextUsage}
	for id, u := range a.perRequest {
		us.PerRequest[id] = u
	}
	return us
}

// MergeRecord puts the record's view of usage and cost into a status
// answer (docs/protocol.md §8 "session/status": usage and cost are the
// record's): the per-request usage always, cumulative usage, cost and
// context usage where the record has them.
func MergeRecord(res *protocol.StatusResult, rec *store.Record) {
	if u := rec.CumulativeTokenUsage; u != nil {
		res.Usage.Cumulative = fromTokenUsage(*u)
	}
	per := map[string]protocol.Usage{}
	for id, u := range rec.RequestTokenUsage {
		per[id] = fromTokenUsage(u)
	}
	res.Usage.PerRequest = per
	if c := rec.CumulativeCost; c != nil {
		res.Cost = &protocol.Cost{Amount: c.Amount, Currency: c.Currency, Basis: protocol.CostSessionCumulative}
	}
	if c := rec.Acpx.ContextUsage; c != nil {
		res.Usage.Context = &protocol.ContextUsage{Used: c.Used, Size: c.Size}
	}
}

// RecordRequestCost keeps a turn's cost c (nil: none, nothing written)
// under the record's acpx.request_cost for requestID.
func RecordRequestCost(r *store.Record, requestID string, c *protocol.Cost) {
	if c == nil {
		return
	}
	if r.Acpx.RequestCost == nil {
		r.Acpx.RequestCost = map[string]store.Cost{}
	}
	r.Acpx.RequestCost[requestID] = store.Cost{Amount: c.Amount, Currency: c.Currency}
}

// fromTokenUsage converts the record's snake_case usage to the protocol's
// (the same token counts).
func fromTokenUsage(u store.TokenUsage) protocol.Usage {
	return protocol.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
		CachedReadTokens: u.CachedReadTokens, CachedWriteTokens: u.CachedWriteTokens, ThoughtTokens: u.ThoughtTokens}
}

// toTokenUsage converts usage for the record (fromTokenUsage's inverse).
func toTokenUsage(u protocol.Usage) store.TokenUsage {
	return store.TokenUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
		CachedReadTokens: u.CachedReadTokens, CachedWriteTokens: u.CachedWriteTokens, ThoughtTokens: u.ThoughtTokens}
}
