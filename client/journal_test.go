package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// TestJournalPagesByN: a key opened twice keeps both sessions' entries;
// JournalPages pages them by n (one entry a page) from 1 with no gap,
// every page complete, the two sessions in order; by seq it serves the
// latest session; session/status reports persistence ok.
func TestJournalPagesByN(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mark := testmark.New()
	c := start(t, client.Options{OnJournal: func(n client.JournalNotice) { t.Errorf("unexpected session/journal: %+v", n) }})
	var ids []string
	for i := 0; i < 2; i++ {
		s, err := c.Open(ctx, client.OpenParams{SessionKey: "client-journal", Agent: "generic",
			Command: client.Command{Path: faultagentBin}, Cwd: t.TempDir(), Env: map[string]string{testmark.Env: mark}})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		ids = append(ids, s.ID())
		if _, err := s.Prompt(ctx, client.PromptParams{RequestID: "t1", Prompt: "hi"}, nil); err != nil {
			t.Fatalf("Prompt: %v", err)
		}
		st, err := s.Status(ctx)
		if err != nil || st.Persistence == nil || st.Persistence.Journal != "ok" || st.Persistence.Record != "ok" {
			t.Fatalf("Status persistence: %+v, %v", st, err)
		}
		if _, err := s.Close(ctx, client.CloseParams{Reason: "test"}); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	type entry struct {
		N       uint64 `json:"n"`
		Session string `json:"session"`
	}
	var all []entry
	limit := 1
	err := c.JournalPages(ctx, client.EventsParams{SessionKey: "client-journal", Limit: &limit}, func(p *client.EventsResult) bool {
		if !p.Complete || len(p.Gaps) != 0 || len(p.Events) != 1 {
			t.Errorf("page %+v: want one entry, complete, no gaps", p)
		}
		var e entry
		if err := json.Unmarshal(p.Events[0], &e); err != nil || p.NextN != e.N {
			t.Errorf("entry %s (nextN %d): %v", p.Events[0], p.NextN, err)
		}
		all = append(all, e)
		return true
	})
	if err != nil {
		t.Fatalf("JournalPages: %v", err)
	}
	if len(all) < 4 || all[0].Session != ids[0] || all[len(all)-1].Session != ids[1] {
		t.Fatalf("entries %+v, want both sessions in order", all)
	}
	for i, e := range all {
		if e.N != uint64(i+1) {
			t.Fatalf("entry %d has n %d", i, e.N)
		}
	}
	zero := int64(0)
	latest, err := c.Events(ctx, client.EventsParams{SessionKey: "client-journal", AfterSeq: &zero})
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range latest.Events {
		var e entry
		if json.Unmarshal(raw, &e) != nil || e.Session != ids[1] {
			t.Fatalf("afterSeq 0 returned %s, want only the latest session %s", raw, ids[1])
		}
	}
	if _, err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoMarkedProcess(t, mark)
}
