package e2e

// Status, usage and cost (docs/protocol.md, session/status and
// session/prompt; docs/rules.md#r23, #r30).

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// TestRunning_StatusMapsPersistedRecordAndVerifiesIdentity
// (docs/rules.md#r23): status reports the record's models, usage (cumulative
// and per request) and last request id; a value changed on disk shows in
// status (it is read from the record); a record naming another ACP session
// gives ACPX_PERSISTED_SESSION_IDENTITY_MISMATCH and a missing one
// ACPX_PERSISTED_SESSION_MISSING.
func TestRunning_StatusMapsPersistedRecordAndVerifiesIdentity(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := seedMustOpen(s, e.openParams("status", ""))
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "hi"}, &res)
	type status struct {
		State         string  `json:"state"`
		LastRequestID *string `json:"lastRequestId"`
		Models        *struct {
			CurrentModelID string `json:"currentModelId"`
		} `json:"models"`
		Usage struct {
			Cumulative struct {
				TotalTokens int64 `json:"totalTokens"`
			} `json:"cumulative"`
			PerRequest map[string]struct {
				TotalTokens int64 `json:"totalTokens"`
			} `json:"perRequest"`
		} `json:"usage"`
	}
	var st status
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.LastRequestID == nil || *st.LastRequestID != "t1" || st.Usage.Cumulative.TotalTokens != 15 ||
		st.Usage.PerRequest["t1"].TotalTokens != 15 || st.Models == nil || st.Models.CurrentModelID != "fa-model" || st.State != "open" {
		t.Errorf("status %+v: want open, lastRequestId t1, 15 tokens cumulative and for t1, model fa-model", st)
	}
	path := e.recordPath("status")
	edit := func(fn func(m map[string]any)) {
		m := seedReadJSON(t, path)
		fn(m)
		b, _ := json.Marshal(m)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	edit(func(m map[string]any) {
		m["last_request_id"] = "from-disk"
		m["cumulative_token_usage"] = map[string]any{"input_tokens": 1, "output_tokens": 2, "total_tokens": 99}
	})
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.LastRequestID == nil || *st.LastRequestID != "from-disk" || st.Usage.Cumulative.TotalTokens != 99 {
		t.Errorf("status after editing the record: lastRequestId %v cumulative %d, want from-disk / 99 (read from the record)",
			st.LastRequestID, st.Usage.Cumulative.TotalTokens)
	}
	edit(func(m map[string]any) { m["acp_session_id"] = "fa-someone-else" })
	seedWantError(t, "status with a record naming another session", s.call("session/status", map[string]any{"session": o.Session}),
		-32000, "ACPX_PERSISTED_SESSION_IDENTITY_MISMATCH")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	seedWantError(t, "status without a record", s.call("session/status", map[string]any{"session": o.Session}),
		-32000, "ACPX_PERSISTED_SESSION_MISSING")
	seedCloseProof(t, s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestUsage_PerTurnCumulativeAndCostSurviveResume: a turn's result carries
// the agent's usage and the usage_update cost with basis "turn"; status
// carries the cumulative usage, per-request usage and the cost with basis
// "session-cumulative"; after close and a resumed reopen of the same key,
// status reports the persisted cumulative usage and cost and the next turn
// adds to them (docs/protocol.md, session/prompt and session/status).
func TestUsage_PerTurnCumulativeAndCostSurviveResume(t *testing.T) {
	e := newFaultEnv(t)
	agentState := agentWritableDir(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	const cost = 0.0125
	p := withHostHome(e.openParams("usage", ""))
	p["command"] = map[string]any{"path": faultBin, "args": []string{"--mode", "cost=0.0125", "--state-dir", agentState}}
	var open openResult
	s.mustCall("session/open", p, &open)

	for _, id := range []string{"t1", "t2"} {
		res := runTurn(t, s, open.Session, id, "count me")
		if res.Usage == nil || *res.Usage != (usageJSON{10, 5, 15}) {
			t.Errorf("turn %s usage %+v, want {10 5 15}", id, res.Usage)
		}
		if res.Cost == nil || !near(res.Cost.Amount, cost) || res.Cost.Currency != "USD" || res.Cost.Basis != "turn" {
			t.Errorf("turn %s cost %+v, want %v USD basis turn", id, res.Cost, cost)
		}
	}
	st := statusOf(s, open.Session)
	if st.Usage.Cumulative != (usageJSON{20, 10, 30}) || st.Usage.PerRequest["t1"].TotalTokens != 15 || st.Usage.PerRequest["t2"].TotalTokens != 15 {
		t.Errorf("status usage %+v, want cumulative {20 10 30} and 15 per request", st.Usage)
	}
	if st.Cost == nil || !near(st.Cost.Amount, 2*cost) || st.Cost.Currency != "USD" || st.Cost.Basis != "session-cumulative" {
		t.Errorf("status cost %+v, want %v USD session-cumulative", st.Cost, 2*cost)
	}
	closeClean(t, s, open.Session, e.mark, e.work)

	var again openResult
	s.mustCall("session/open", p, &again)
	if !again.Resumed || again.Identity.BackendSessionID != open.Identity.BackendSessionID {
		t.Fatalf("reopen did not resume: %+v", again)
	}
	st = statusOf(s, again.Session)
	if st.Usage.Cumulative != (usageJSON{20, 10, 30}) || st.Usage.PerRequest["t2"].TotalTokens != 15 {
		t.Errorf("resumed status usage %+v, want the persisted cumulative {20 10 30}", st.Usage)
	}
	if st.Cost == nil || !near(st.Cost.Amount, 2*cost) || st.Cost.Basis != "session-cumulative" {
		t.Errorf("resumed status cost %+v, want %v session-cumulative", st.Cost, 2*cost)
	}
	res := runTurn(t, s, again.Session, "t3", "count me too")
	if res.Cost == nil || !near(res.Cost.Amount, cost) || res.Cost.Basis != "turn" {
		t.Errorf("resumed turn cost %+v, want %v basis turn", res.Cost, cost)
	}
	st = statusOf(s, again.Session)
	if st.Usage.Cumulative != (usageJSON{30, 15, 45}) {
		t.Errorf("status usage after the resumed turn %+v, want {30 15 45}", st.Usage.Cumulative)
	}
	if st.Cost == nil || !near(st.Cost.Amount, 3*cost) {
		t.Errorf("status cost after the resumed turn %+v, want %v", st.Cost, 3*cost)
	}
	closeClean(t, s, again.Session, e.mark, e.work)
}

// TestRunning_TurnAndSessionCostReportedSeparately (docs/rules.md#r30): the
// agent reports cost as ACP defines UsageUpdate.cost — the cumulative
// session cost (0.25 after turn 1, 0.5 after turn 2). Each turn's result
// carries that turn's cost (0.25, basis "turn") and status the session's
// (0.5, basis "session-cumulative").
func TestRunning_TurnAndSessionCostReportedSeparately(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := seedMustOpen(s, e.openParams("cost", "cost=0.25"))
	type cost struct {
		Amount   float64 `json:"amount"`
		Currency string  `json:"currency"`
		Basis    string  `json:"basis"`
	}
	for _, rid := range []string{"t1", "t2"} {
		var r struct {
			Status string `json:"status"`
			Cost   *cost  `json:"cost"`
		}
		s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": rid, "prompt": "spend"}, &r)
		if r.Cost == nil || r.Cost.Amount != 0.25 || r.Cost.Currency != "USD" || r.Cost.Basis != "turn" {
			t.Errorf("%s cost %+v, want {0.25 USD turn}", rid, r.Cost)
		}
	}
	var st struct {
		Cost *cost `json:"cost"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.Cost == nil || st.Cost.Amount != 0.5 || st.Cost.Currency != "USD" || st.Cost.Basis != "session-cumulative" {
		t.Errorf("status cost %+v, want {0.5 USD session-cumulative}", st.Cost)
	}
	seedCloseProof(t, s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
