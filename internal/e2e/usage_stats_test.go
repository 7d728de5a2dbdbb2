package e2e

// Usage in records (docs/protocol.md §8 session/status, Usage in records)
// and sidecar/stats (docs/protocol.md §17): prompt-result usage and the
// last usage_update (used/size, cost) are in the record under acpx's keys
// and reported by status after a sidecar restart; the counters match what
// the test did.

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

type usageStatus struct {
	Usage struct {
		Cumulative struct {
			TotalTokens int64 `json:"totalTokens"`
		} `json:"cumulative"`
		PerRequest map[string]struct {
			TotalTokens int64 `json:"totalTokens"`
		} `json:"perRequest"`
		Context *struct {
			Used int64 `json:"used"`
			Size int64 `json:"size"`
		} `json:"context"`
	} `json:"usage"`
	Cost *struct {
		Amount float64 `json:"amount"`
		Basis  string  `json:"basis"`
	} `json:"cost"`
}

func wantUsage(t *testing.T, what string, st usageStatus) {
	t.Helper()
	u := st.Usage
	if u.Cumulative.TotalTokens != 30 || len(u.PerRequest) != 2 || u.PerRequest["t1"].TotalTokens != 15 || u.PerRequest["t2"].TotalTokens != 15 {
		t.Errorf("%s: usage %+v, want cumulative 30, t1 and t2 15 each", what, u)
	}
	if u.Context == nil || u.Context.Used != 200 || u.Context.Size != 1000 {
		t.Errorf("%s: usage.context %+v, want used 200 (turn 2 × 100) size 1000", what, u.Context)
	}
	if st.Cost == nil || st.Cost.Amount != 1.0 || st.Cost.Basis != "session-cumulative" {
		t.Errorf("%s: cost %+v, want 1.0 session-cumulative", what, st.Cost)
	}
}

// TestUsage_SurvivesSidecarRestart: two turns whose usage_update says
// used 100 then 200 of 1000 with cumulative cost 0.5 then 1.0; status
// reports it; the record holds cumulative_token_usage,
// request_token_usage, cumulative_cost and acpx.context_usage; a new
// sidecar resuming the key reports the same before any turn.
func TestUsage_SurvivesSidecarRestart(t *testing.T) {
	e := newFaultEnv(t)
	faultState := agentWritableDir(t) // the agent keeps its sessions so the next sidecar can load it
	p := withHostHome(e.openParams("usage", "cost=0.5,usage-grow=100"))
	p["command"].(map[string]any)["args"] = []string{"--mode", "cost=0.5,usage-grow=100", "--state-dir", faultState}
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	var o openResult
	s.mustCall("session/open", p, &o)
	for _, rid := range []string{"t1", "t2"} {
		s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": rid, "prompt": "go"}, nil)
	}
	var st usageStatus
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	wantUsage(t, "live status", st)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Fatalf("exit status %d", status)
	}
	var rec struct {
		Cumulative *struct {
			TotalTokens int64 `json:"total_tokens"`
		} `json:"cumulative_token_usage"`
		PerRequest map[string]struct {
			TotalTokens int64 `json:"total_tokens"`
		} `json:"request_token_usage"`
		Cost *struct {
			Amount float64 `json:"amount"`
		} `json:"cumulative_cost"`
		Acpx struct {
			ContextUsage *struct {
				Used int64 `json:"used"`
				Size int64 `json:"size"`
			} `json:"context_usage"`
		} `json:"acpx"`
	}
	b, err := os.ReadFile(e.recordPath("usage"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Cumulative == nil || rec.Cumulative.TotalTokens != 30 || rec.PerRequest["t2"].TotalTokens != 15 ||
		rec.Cost == nil || rec.Cost.Amount != 1.0 || rec.Acpx.ContextUsage == nil || rec.Acpx.ContextUsage.Used != 200 {
		t.Errorf("record usage: %s", b)
	}

	s2 := startSidecar(t, seedArgs(e)...)
	s2.initialize(false)
	var o2 openResult
	s2.mustCall("session/open", p, &o2)
	if !o2.Resumed {
		t.Fatal("the second sidecar did not resume the key: usage after restart is not tested")
	}
	var st2 usageStatus
	s2.mustCall("session/status", map[string]any{"session": o2.Session}, &st2)
	wantUsage(t, "status after restart", st2)
	closeProof(s2, o2.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

type statsResult struct {
	Sessions struct {
		Open, Turn, Closing, Closed, Dead int
	} `json:"sessions"`
	Turns struct {
		Running, Queued              int
		Completed, Failed, Cancelled uint64
	} `json:"turns"`
	UpdatesForwarded uint64 `json:"updatesForwarded"`
	Proofs           struct {
		Complete, Incomplete uint64
		Retained             int
		Recovered            uint64
	} `json:"proofs"`
	CloseToProofMs struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"closeToProofMs"`
}

// TestStats_CountersMatchWhatTheTestDid: one turn completed, a queued turn
// cancelled before it started, a running turn cancelled, a turn failed by
// its provider's death; one session closed, one dead, one open in a turn
// with one queued behind it. sidecar/stats says exactly that, counts
// every session/update the host received, two complete proofs (the close,
// the provider exit) and a close→proof time.
func TestStats_CountersMatchWhatTheTestDid(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	var st statsResult
	s.mustCall("sidecar/stats", map[string]any{}, &st)
	if st.Turns.Completed != 0 || st.UpdatesForwarded != 0 || st.Sessions.Open != 0 {
		t.Fatalf("fresh sidecar stats %+v", st)
	}
	a := e.open(s, "a", "slow-turn=400")
	s.mustCall("session/prompt", map[string]any{"session": a.Session, "requestId": "a1", "prompt": "go"}, nil) // completed
	idA2 := promptQueued(s, a.Session, "a2")
	idA3 := promptQueued(s, a.Session, "a3")
	s.mustCall("session/cancel", map[string]any{"session": a.Session, "requestId": "a3"}, nil) // queued, cancelled
	s.mustCall("session/cancel", map[string]any{"session": a.Session, "requestId": "a2"}, nil) // running, cancelled
	for _, id := range []string{idA2, idA3} {
		if r := decodeResult[turnResult](t, "cancelled", s.await(id, 10*time.Second)); r.Status != "cancelled" {
			t.Fatalf("turn %s: %+v, want cancelled", r.RequestID, r)
		}
	}
	closeProof(s, a.Session, nil)

	b := e.open(s, "b", "crash-mid-turn")
	if r := decodeResult[turnResult](t, "crash", s.call("session/prompt", map[string]any{"session": b.Session, "requestId": "b1", "prompt": "go"})); r.Status != "failed" {
		t.Fatalf("turn b1: %+v, want failed", r)
	}
	s.waitNote("cleanup/proof", 10*time.Second, func(raw json.RawMessage) bool {
		var n recoveredProof
		return json.Unmarshal(raw, &n) == nil && n.Proof.Session == b.Session
	})

	c := e.open(s, "c", "slow-turn=20000")
	idC1 := promptQueued(s, c.Session, "c1")
	promptQueued(s, c.Session, "c2")
	s.waitNote("session/update", 10*time.Second, func(p json.RawMessage) bool { // c1 is running
		var u updateNote
		return json.Unmarshal(p, &u) == nil && u.RequestID != nil && *u.RequestID == "c1"
	})
	s.mustCall("sidecar/stats", map[string]any{}, &st)
	ss, tt, pp := st.Sessions, st.Turns, st.Proofs
	if ss.Open != 0 || ss.Turn != 1 || ss.Closed != 1 || ss.Dead != 1 || ss.Closing != 0 {
		t.Errorf("sessions %+v, want turn 1 closed 1 dead 1", ss)
	}
	if tt.Running != 1 || tt.Queued != 1 || tt.Completed != 1 || tt.Cancelled != 2 || tt.Failed != 1 {
		t.Errorf("turns %+v, want running 1 queued 1 completed 1 cancelled 2 failed 1", tt)
	}
	if n := uint64(len(s.notesOf("session/update"))); st.UpdatesForwarded != n {
		t.Errorf("updatesForwarded %d, the host received %d", st.UpdatesForwarded, n)
	}
	if pp.Complete != 2 || pp.Incomplete != 0 || pp.Retained != 0 || pp.Recovered != 0 {
		t.Errorf("proofs %+v, want complete 2 (close, provider exit)", pp)
	}
	if st.CloseToProofMs.P50 <= 0 || st.CloseToProofMs.P99 < st.CloseToProofMs.P50 {
		t.Errorf("closeToProofMs %+v, want one positive sample", st.CloseToProofMs)
	}
	closeProof(s, c.Session, nil)
	s.await(idC1, 10*time.Second)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
