package client_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// TestPromptDeliversEveryUpdateAsTheWireHasIt: a flood (and one update
// longer than the read buffer) reaches Prompt's callback and
// PromptBatches' batches complete, in seq order, each update equal to
// what encoding/json reads from the same frame (the tap's copy).
func TestPromptDeliversEveryUpdateAsTheWireHasIt(t *testing.T) {
	const flood, long = 5000, 200_000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mark := testmark.New()
	var mu sync.Mutex
	wire := map[string][]client.Update{} // by requestId
	c := start(t, client.Options{OnFrame: func(f client.Frame) {
		var m struct {
			Method string        `json:"method"`
			Params client.Update `json:"params"`
		}
		if !f.Sent && json.Unmarshal(f.Data, &m) == nil && m.Method == "session/update" && m.Params.RequestID != nil {
			mu.Lock()
			wire[*m.Params.RequestID] = append(wire[*m.Params.RequestID], m.Params)
			mu.Unlock()
		}
	}})
	s := openFault(ctx, t, c, "fast-path", mark, client.OpenParams{}, "flood=5000", "long-line=200000")

	var got []client.Update
	res, err := s.Prompt(ctx, client.PromptParams{RequestID: "t1", Prompt: "go"}, func(u client.Update) { got = append(got, u) })
	if err != nil || res.Status != "completed" {
		t.Fatalf("Prompt: %+v, %v", res, err)
	}
	var batches [][]client.Update
	res, err = s.PromptBatches(ctx, client.PromptParams{RequestID: "t2", Prompt: "go"}, func(b []client.Update) { batches = append(batches, b) })
	if err != nil || res.Status != "completed" {
		t.Fatalf("PromptBatches: %+v, %v", res, err)
	}
	var flat []client.Update
	for i, b := range batches {
		if len(b) == 0 {
			t.Fatalf("batch %d is empty", i)
		}
		flat = append(flat, b...)
	}

	mu.Lock()
	defer mu.Unlock()
	longSeen := false
	for rid, ups := range map[string][]client.Update{"t1": got, "t2": flat} {
		// hello, the flood, the long line, usage_update
		if len(ups) != flood+3 {
			t.Fatalf("%s: %d updates, want %d", rid, len(ups), flood+3)
		}
		if !reflect.DeepEqual(ups, wire[rid]) {
			for i := range ups {
				if i < len(wire[rid]) && !reflect.DeepEqual(ups[i], wire[rid][i]) {
					t.Fatalf("%s: update %d = %+v, the wire has %+v", rid, i, ups[i], wire[rid][i])
				}
			}
			t.Fatalf("%s: %d updates delivered, the wire had %d", rid, len(ups), len(wire[rid]))
		}
		for i, u := range ups {
			if u.Session != s.ID() || (i > 0 && u.Seq != ups[i-1].Seq+1) {
				t.Fatalf("%s: update %d = session %s seq %d after %d", rid, i, u.Session, u.Seq, ups[max(i-1, 0)].Seq)
			}
			longSeen = longSeen || len(u.Update) > long
		}
	}
	if flat[0].Seq != got[len(got)-1].Seq+1 {
		t.Errorf("t2 starts at seq %d, t1 ended at %d", flat[0].Seq, got[len(got)-1].Seq)
	}
	if !longSeen {
		t.Errorf("no update longer than %d bytes was delivered", long)
	}
	if _, err := s.Close(ctx, client.CloseParams{}); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	assertNoMarkedProcess(t, mark)
}
