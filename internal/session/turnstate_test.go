package session

import (
	"strconv"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestTurnState_ToolCallMapBounded: the tool-call → turn map starts afresh
// past maxToolTurns entries, and a call's completion forgets it.
func TestTurnState_ToolCallMapBounded(t *testing.T) {
	ts := turnState{toolTurns: map[string]string{}, turn: &turn{requestID: "t1"}}
	for i := 0; i < maxToolTurns; i++ {
		ts.toolCallStarted("c" + strconv.Itoa(i))
	}
	if len(ts.toolTurns) != maxToolTurns {
		t.Fatalf("%d entries, want %d", len(ts.toolTurns), maxToolTurns)
	}
	ts.toolCallStarted("one-more")
	if len(ts.toolTurns) != 1 || ts.toolTurns["one-more"] != "t1" {
		t.Fatalf("past the bound the map holds %d entries, want only the new call", len(ts.toolTurns))
	}
	ts.turn = &turn{requestID: "t2"}
	if rid := ts.toolCallUpdated("one-more", "completed"); rid == nil || *rid != "t1" {
		t.Fatalf("update of t1's call during t2 attributed to %v, want t1", rid)
	}
	if _, ok := ts.toolTurns["one-more"]; ok {
		t.Fatal("a completed call is still mapped")
	}
	ts.turn = nil
	ts.toolCallStarted("no-turn")
	if _, ok := ts.toolTurns["no-turn"]; ok {
		t.Fatal("a call outside any turn was attributed to one")
	}
}

// TestAccounting_RecordRoundTrip: a turn's usage is kept per request and
// summed (input, output, total), written to the record and read back
// unchanged by a resumed session; status is a copy.
func TestAccounting_RecordRoundTrip(t *testing.T) {
	a := accounting{perRequest: map[string]protocol.Usage{}}
	a.addTurn("r1", protocol.Usage{InputTokens: 3, OutputTokens: 4, TotalTokens: 7})
	a.addTurn("r2", protocol.Usage{InputTokens: 10, OutputTokens: 1, TotalTokens: 11})
	a.cost = &protocol.Cost{Amount: 0.5, Currency: "USD", Basis: protocol.CostSessionCumulative}
	a.contextUsage = &protocol.ContextUsage{Used: 100, Size: 1000}
	if a.usage.InputTokens != 13 || a.usage.OutputTokens != 5 || a.usage.TotalTokens != 18 {
		t.Fatalf("cumulative %+v", a.usage)
	}
	var r store.Record
	a.toRecord(&r)
	b := accounting{perRequest: map[string]protocol.Usage{}}
	b.restore(&r)
	if b.usage != a.usage || len(b.perRequest) != 2 || b.perRequest["r1"] != a.perRequest["r1"] ||
		*b.cost != *a.cost || *b.contextUsage != *a.contextUsage {
		t.Fatalf("restored %+v, want %+v", b, a)
	}
	st := b.status()
	st.PerRequest["r3"] = protocol.Usage{}
	if _, ok := b.perRequest["r3"]; ok {
		t.Fatal("status shares the actor's per-request map")
	}
}
