package usage

import (
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestAccounting_RecordRoundTrip: a turn's usage is kept per request and
// summed (input, output, total), written to the record and read back
// unchanged by a resumed session; status is a copy.
func TestAccounting_RecordRoundTrip(t *testing.T) {
	a := Accounting{perRequest: map[string]protocol.Usage{}}
	a.AddTurn("r1", protocol.Usage{InputTokens: 3, OutputTokens: 4, TotalTokens: 7})
	a.AddTurn("r2", protocol.Usage{InputTokens: 10, OutputTokens: 1, TotalTokens: 11})
	a.cost = &protocol.Cost{Amount: 0.5, Currency: "USD", Basis: protocol.CostSessionCumulative}
	a.contextUsage = &protocol.ContextUsage{Used: 100, Size: 1000}
	if a.usage.InputTokens != 13 || a.usage.OutputTokens != 5 || a.usage.TotalTokens != 18 {
		t.Fatalf("cumulative %+v", a.usage)
	}
	var r store.Record
	a.ToRecord(&r)
	b := Accounting{perRequest: map[string]protocol.Usage{}}
	b.Restore(&r)
	if b.usage != a.usage || len(b.perRequest) != 2 || b.perRequest["r1"] != a.perRequest["r1"] ||
		*b.cost != *a.cost || *b.contextUsage != *a.contextUsage {
		t.Fatalf("restored %+v, want %+v", b, a)
	}
	st := b.Status()
	st.PerRequest["r3"] = protocol.Usage{}
	if _, ok := b.perRequest["r3"]; ok {
		t.Fatal("status shares the actor's per-request map")
	}
}

func i64(v int64) *int64 { return &v }

// TestAccounting_Arithmetic: a zero Accounting sums turns' input, output
// and total tokens (not cached or thought ones), keeps the last usage of a
// request id, keeps a usage_update's cost and a whole, non-negative
// context report only, and a turn's cost is the growth of the cumulative
// cost or, when it went down, its whole amount.
func TestAccounting_Arithmetic(t *testing.T) {
	var a Accounting
	if st := a.Status(); st.PerRequest == nil || len(st.PerRequest) != 0 || st.Context != nil || a.Cost() != nil || a.CostAmount() != 0 {
		t.Fatalf("zero accounting: status %+v cost %v amount %v", st, a.Cost(), a.CostAmount())
	}
	a.AddTurn("r1", protocol.Usage{InputTokens: 5, OutputTokens: 2, TotalTokens: 7, CachedReadTokens: i64(3), ThoughtTokens: i64(1)})
	a.AddTurn("r1", protocol.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2})
	if want := (protocol.Usage{InputTokens: 6, OutputTokens: 3, TotalTokens: 9}); a.usage != want {
		t.Fatalf("cumulative %+v, want %+v", a.usage, want)
	}
	if st := a.Status(); len(st.PerRequest) != 1 || st.PerRequest["r1"].TotalTokens != 2 {
		t.Fatalf("per request %+v, want r1's last usage only", st.PerRequest)
	}

	a.UsageUpdate(nil, i64(10), nil)
	a.UsageUpdate(nil, i64(-1), i64(100))
	if a.contextUsage != nil || a.cost != nil {
		t.Fatalf("a partial or negative report was kept: context %+v cost %+v", a.contextUsage, a.cost)
	}
	a.UsageUpdate(&ReportedCost{Amount: 0.75, Currency: "USD"}, i64(10), i64(100))
	if want := (protocol.Cost{Amount: 0.75, Currency: "USD", Basis: protocol.CostSessionCumulative}); a.Cost() == nil || *a.Cost() != want {
		t.Fatalf("cost %+v, want %+v", a.Cost(), want)
	}
	if a.CostAmount() != 0.75 || a.Status().Context == nil || *a.Status().Context != (protocol.ContextUsage{Used: 10, Size: 100}) {
		t.Fatalf("amount %v context %+v", a.CostAmount(), a.Status().Context)
	}

	for _, c := range []struct {
		name  string
		total float64
		base  float64
		want  float64
	}{
		{"growth", 1.25, 0.75, 0.5},
		{"no growth", 0.75, 0.75, 0},
		{"count restarted", 0.25, 0.75, 0.25},
		{"first turn", 0.5, 0, 0.5},
	} {
		got := TurnCost(ReportedCost{Amount: c.total, Currency: "EUR"}, c.base)
		if *got != (protocol.Cost{Amount: c.want, Currency: "EUR", Basis: protocol.CostTurn}) {
			t.Errorf("%s: TurnCost(%v, base %v) = %+v, want amount %v", c.name, c.total, c.base, *got, c.want)
		}
	}
}

// TestMergeRecord: a status answer takes the record's per-request usage
// always (empty, not nil, when the record has none) and its cumulative
// usage, cost and context where the record has them.
func TestMergeRecord(t *testing.T) {
	live := protocol.StatusResult{Usage: protocol.UsageStatus{Cumulative: protocol.Usage{TotalTokens: 99},
		PerRequest: map[string]protocol.Usage{"live": {}}, Context: &protocol.ContextUsage{Used: 1, Size: 2}},
		Cost: &protocol.Cost{Amount: 9, Currency: "USD", Basis: protocol.CostSessionCumulative}}

	res := live
	MergeRecord(&res, &store.Record{})
	if res.Usage.Cumulative.TotalTokens != 99 || res.Usage.PerRequest == nil || len(res.Usage.PerRequest) != 0 ||
		res.Cost.Amount != 9 || res.Usage.Context.Used != 1 {
		t.Fatalf("empty record: %+v cost %+v", res.Usage, res.Cost)
	}

	var rec store.Record
	rec.CumulativeTokenUsage = &store.TokenUsage{InputTokens: 4, OutputTokens: 2, TotalTokens: 6, CachedReadTokens: i64(1)}
	rec.RequestTokenUsage = map[string]store.TokenUsage{"t1": {InputTokens: 4, OutputTokens: 2, TotalTokens: 6}}
	rec.CumulativeCost = &store.Cost{Amount: 1.5, Currency: "USD"}
	rec.Acpx.ContextUsage = &store.ContextUsage{Used: 20, Size: 1000}
	res = live
	MergeRecord(&res, &rec)
	if c := res.Usage.Cumulative; c.TotalTokens != 6 || c.CachedReadTokens == nil || *c.CachedReadTokens != 1 {
		t.Fatalf("cumulative %+v", c)
	}
	if len(res.Usage.PerRequest) != 1 || res.Usage.PerRequest["t1"].TotalTokens != 6 {
		t.Fatalf("per request %+v", res.Usage.PerRequest)
	}
	if *res.Cost != (protocol.Cost{Amount: 1.5, Currency: "USD", Basis: protocol.CostSessionCumulative}) ||
		*res.Usage.Context != (protocol.ContextUsage{Used: 20, Size: 1000}) {
		t.Fatalf("cost %+v context %+v", res.Cost, res.Usage.Context)
	}
}

// TestRecordRequestCost: a turn's cost lands under the record's
// acpx.request_cost by request id; no cost writes nothing.
func TestRecordRequestCost(t *testing.T) {
	var r store.Record
	RecordRequestCost(&r, "t1", nil)
	if r.Acpx.RequestCost != nil {
		t.Fatalf("no cost wrote %+v", r.Acpx.RequestCost)
	}
	RecordRequestCost(&r, "t1", &protocol.Cost{Amount: 0.25, Currency: "USD", Basis: protocol.CostTurn})
	RecordRequestCost(&r, "t2", &protocol.Cost{Amount: 0.5, Currency: "USD", Basis: protocol.CostTurn})
	if len(r.Acpx.RequestCost) != 2 || r.Acpx.RequestCost["t1"] != (store.Cost{Amount: 0.25, Currency: "USD"}) {
		t.Fatalf("request cost %+v", r.Acpx.RequestCost)
	}
}

// TestTokenUsage_RoundTrip: every token count, optional ones included,
// survives the record's snake_case form.
func TestTokenUsage_RoundTrip(t *testing.T) {
	u := protocol.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CachedReadTokens: i64(3), CachedWriteTokens: i64(2), ThoughtTokens: i64(4)}
	r := toTokenUsage(u)
	if r.InputTokens != 10 || r.OutputTokens != 5 || r.TotalTokens != 15 || *r.CachedReadTokens != 3 || *r.CachedWriteTokens != 2 || *r.ThoughtTokens != 4 {
		t.Fatalf("record form %+v", r)
	}
	back := fromTokenUsage(r)
	if back.TotalTokens != 15 || *back.CachedReadTokens != 3 || *back.CachedWriteTokens != 2 || *back.ThoughtTokens != 4 {
		t.Fatalf("round trip %+v", back)
	}
}
