package usage

import (
	"encoding/json"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestParseReceipt: a live turn_completed notification for the session's
// ACP session with token fields that add up is a receipt (optional counts
// only when positive, cost in USD from ticks only when whole); anything
// else says why, and another update kind is no receipt at all.
func TestParseReceipt(t *testing.T) {
	const sid = "acp-1"
	notice := func(usage string) string {
		return `{"sessionId":"acp-1","update":{"sessionUpdate":"turn_completed","usage":` + usage + `}}`
	}
	for _, c := range []struct {
		name      string
		params    string
		why       string
		usage     protocol.Usage
		cost      *protocol.Cost
		noReceipt bool // neither receipt nor why
	}{
		{name: "minimal", params: notice(`{"inputTokens":10,"outputTokens":5,"totalTokens":15}`),
			usage: protocol.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}},
		{name: "full", params: notice(`{"inputTokens":10,"outputTokens":5,"totalTokens":15,"cachedReadTokens":4,"cacheCreationTokens":2,"reasoningTokens":3,"costUsdTicks":25000000000}`),
			usage: protocol.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CachedReadTokens: i64(4), CachedWriteTokens: i64(2), ThoughtTokens: i64(3)},
			cost:  &protocol.Cost{Amount: 2.5, Currency: "USD", Basis: protocol.CostTurn}},
		{name: "zero cost", params: notice(`{"inputTokens":0,"outputTokens":0,"totalTokens":0,"cachedReadTokens":0,"costUsdTicks":0}`),
			usage: protocol.Usage{}, cost: &protocol.Cost{Amount: 0, Currency: "USD", Basis: protocol.CostTurn}},
		{name: "partial cost", params: notice(`{"inputTokens":1,"outputTokens":1,"totalTokens":2,"costUsdTicks":100,"costIsPartial":true}`),
			usage: protocol.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}},
		{name: "negative cost", params: notice(`{"inputTokens":1,"outputTokens":1,"totalTokens":2,"costUsdTicks":-1}`),
			usage: protocol.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}},
		{name: "other kind", params: `{"sessionId":"acp-1","update":{"sessionUpdate":"agent_message_chunk"}}`, noReceipt: true},
		{name: "not json", params: `[1,2]`, why: "not a session notification"},
		{name: "replay", params: `{"sessionId":"acp-1","update":{"sessionUpdate":"turn_completed","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}},"_meta":{"isReplay":true}}`, why: "replayed, not live"},
		{name: "other session", params: `{"sessionId":"acp-2","update":{"sessionUpdate":"turn_completed","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}}`, why: "for another ACP session"},
		{name: "no usage", params: `{"sessionId":"acp-1","update":{"sessionUpdate":"turn_completed"}}`, why: "no usage"},
		{name: "incomplete", params: notice(`{"inputTokens":1,"outputTokens":1,"totalTokens":2,"usageIsIncomplete":true}`), why: "usage marked incomplete"},
		{name: "missing total", params: notice(`{"inputTokens":1,"outputTokens":1}`), why: "token fields missing"},
		{name: "negative", params: notice(`{"inputTokens":1,"outputTokens":1,"totalTokens":2,"reasoningTokens":-1}`), why: "negative token counts"},
		{name: "bad total", params: notice(`{"inputTokens":1,"outputTokens":1,"totalTokens":3}`), why: "totalTokens is not inputTokens + outputTokens"},
		{name: "cached over input", params: notice(`{"inputTokens":3,"outputTokens":1,"totalTokens":4,"cachedReadTokens":2,"cacheCreationTokens":2}`), why: "cached tokens exceed inputTokens"},
	} {
		r, why := ParseReceipt(json.RawMessage(c.params), sid)
		switch {
		case c.noReceipt:
			if r != nil || why != "" {
				t.Errorf("%s: got %+v, %q; want no receipt and no why", c.name, r, why)
			}
		case c.why != "":
			if r != nil || why != c.why {
				t.Errorf("%s: got %+v, %q; want why %q", c.name, r, why, c.why)
			}
		default:
			if r == nil || why != "" {
				t.Fatalf("%s: got %+v, %q; want a receipt", c.name, r, why)
			}
			if got, _ := json.Marshal(r.Usage); string(got) != mustJSON(c.usage) {
				t.Errorf("%s: usage %s, want %s", c.name, got, mustJSON(c.usage))
			}
			if (r.Cost == nil) != (c.cost == nil) || (r.Cost != nil && *r.Cost != *c.cost) {
				t.Errorf("%s: cost %+v, want %+v", c.name, r.Cost, c.cost)
			}
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestTurnReceipts: only a turn's single live receipt is accepted; a
// refused one is counted, and any receipt after the first discards the
// accepted one.
func TestTurnReceipts(t *testing.T) {
	r1 := &Receipt{Usage: protocol.Usage{TotalTokens: 1}}
	r2 := &Receipt{Usage: protocol.Usage{TotalTokens: 2}}
	type offer struct {
		r    *Receipt
		why  string
		live bool
	}
	for _, c := range []struct {
		name   string
		offers []offer
		whys   []string
		want   *Receipt
	}{
		{"none", nil, nil, nil},
		{"one live", []offer{{r1, "", true}}, []string{""}, r1},
		{"not live", []offer{{r1, "", false}}, []string{"outside a turn"}, nil},
		{"parse refusal", []offer{{nil, "no usage", true}}, []string{"no usage"}, nil},
		{"two live", []offer{{r1, "", true}, {r2, "", true}}, []string{"", "a second receipt in one turn"}, nil},
		{"refused then live", []offer{{nil, "no usage", true}, {r2, "", true}}, []string{"no usage", "a second receipt in one turn"}, nil},
		{"live then refused", []offer{{r1, "", true}, {nil, "replayed, not live", true}}, []string{"", "replayed, not live"}, nil},
	} {
		var tr TurnReceipts
		for i, o := range c.offers {
			if why := tr.Offer(o.r, o.why, o.live); why != c.whys[i] {
				t.Errorf("%s: offer %d: why %q, want %q", c.name, i, why, c.whys[i])
			}
		}
		if got := tr.Accepted(); got != c.want {
			t.Errorf("%s: accepted %+v, want %+v", c.name, got, c.want)
		}
	}
}
