package session

import (
	"strconv"
	"testing"
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
