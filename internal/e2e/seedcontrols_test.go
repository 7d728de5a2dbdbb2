package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The seed's admissions against the fault agent's controls and receipts
// modes (docs/protocol.md §24, "Effort, thinking and policy breaches";
// PROTOCOL §10.5): effort and thinking applied and verified before the
// first prompt, a value not offered refused with nothing left, a load that
// restores another value set again, a drift after admission ending the
// turn as a breach, and Grok's usage receipt.

// controlsOpen is what these tests read of an open result.
type controlsOpen struct {
	Session  string `json:"session"`
	Identity struct {
		BackendSessionID string `json:"backendSessionId"`
	} `json:"identity"`
	Resumed       bool              `json:"resumed"`
	ConfigOptions []json.RawMessage `json:"configOptions"`
}

// recordedMethods reads a fault agent's record file: the methods it
// received, in order.
func recordedMethods(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			Dir string `json:"dir"`
			Msg struct {
				Method string `json:"method"`
				Params struct {
					ConfigID string `json:"configId"`
					Value    string `json:"value"`
				} `json:"params"`
			} `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Dir == "recv" && r.Msg.Method != "" {
			m := r.Msg.Method
			if r.Msg.Params.ConfigID != "" {
				m += " " + r.Msg.Params.ConfigID + "=" + r.Msg.Params.Value
			}
			out = append(out, m)
		}
	}
	return out
}

// TestEffortThinking_AppliedAndVerifiedBeforeTheFirstPrompt: the open's
// effort and thinking go to the agent through its own config options,
// after session/new and before any session/prompt, and the open result
// reports the values the agent confirmed.
func TestEffortThinking_AppliedAndVerifiedBeforeTheFirstPrompt(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	rec := filepath.Join(e.work, "rec.jsonl") // the agent may write only its cwd, HOME and TMPDIR
	p := e.openParams("controls", "controls,record="+rec)
	p["effort"], p["thinking"] = "high", "low"
	var o controlsOpen
	s.mustCall("session/open", p, &o)
	if optionValue(o.ConfigOptions, "effort") != "high" || optionValue(o.ConfigOptions, "thought_level") != "low" {
		t.Fatalf("open result config options %s: want effort high and thought_level low", o.ConfigOptions)
	}
	if st := promptOK(t, s, o.Session, "t1", "hello"); st != "completed" {
		t.Fatalf("turn: %s", st)
	}
	got := strings.Join(recordedMethods(t, rec), ", ")
	want := "session/new, session/set_config_option effort=high, session/set_config_option thought_level=low, session/prompt"
	if !strings.Contains(got, want) {
		t.Fatalf("the agent received %q; want %q in that order", got, want)
	}
	closeRaw(t, s, o.Session)
}

// TestEffortThinking_ValueNotOfferedRefusedNothingLeft: an effort the
// agent's option does not offer is CONTROL_UNAVAILABLE after the
// handshake, with a complete cleanup proof and no process of the open
// alive; thinking for a profile that has no thinking option (qwen) is
// refused before anything is launched.
func TestEffortThinking_ValueNotOfferedRefusedNothingLeft(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("xhigh", "controls")
	p["effort"] = "xhigh"
	d := wantError(t, "effort xhigh", s.call("session/open", p), -32000, "CONTROL_UNAVAILABLE")
	if d.Cleanup == nil || !d.Cleanup.Complete || len(d.Cleanup.Processes) == 0 {
		t.Fatalf("refusal after launch: cleanup %+v, want a complete proof naming the agent", d.Cleanup)
	}
	waitNoMarked(t, e.mark, "", 5*time.Second)
	p = e.openParams("qwen-thinking", "controls")
	p["agent"], p["thinking"] = "qwen", "high"
	d = wantError(t, "qwen thinking", s.call("session/open", p), -32000, "CONTROL_UNAVAILABLE")
	if d.Cleanup != nil && len(d.Cleanup.Processes) > 0 {
		t.Fatalf("qwen thinking launched something: %+v", d.Cleanup)
	}
}

// TestEffortThinking_LoadRestoringAnotherValueIsSetAgain: a reopened
// session whose agent restores the thinking level its session was left
// at (high, set by the host) is set back to the open's and verified
// before the first prompt.
func TestEffortThinking_LoadRestoringAnotherValueIsSetAgain(t *testing.T) {
	e := newFaultEnv(t)
	agentState := agentWritableDir(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := resumeParams(e, "reload", agentState, "controls")
	p["thinking"] = "low"
	var o controlsOpen
	s.mustCall("session/open", p, &o)
	promptOK(t, s, o.Session, "t1", "hello")
	s.mustCall("session/setConfigOption", map[string]any{"session": o.Session, "key": "thought_level", "value": "high"}, nil)
	closeRaw(t, s, o.Session)

	var re controlsOpen
	s.mustCall("session/open", resumeParamsWith(e, "reload", agentState, "controls", map[string]any{"thinking": "low"}), &re)
	if !re.Resumed || re.Identity.BackendSessionID != o.Identity.BackendSessionID {
		t.Fatalf("not resumed: %+v", re)
	}
	if v := optionValue(re.ConfigOptions, "thought_level"); v != "low" {
		t.Fatalf("after the load thought_level is %q, want the open's low set again", v)
	}
	closeRaw(t, s, re.Session)
}

func resumeParamsWith(e *faultEnv, key, agentState, modes string, extra map[string]any) map[string]any {
	p := resumeParams(e, key, agentState, modes)
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// promptOK runs one turn and returns its status (failing on an error).
func promptOK(t *testing.T, s *sidecar, session, rid, text string) string {
	t.Helper()
	return decodeResult[turnResult](t, "turn "+rid, s.await(s.start("session/prompt",
		map[string]any{"session": session, "requestId": rid, "prompt": text}), 60*time.Second)).Status
}

// TestPolicyBreach_DriftEndsTheTurnAuditedAndSetBack: an agent that moves
// the open's effort on its own mid-turn has its turn ended failed
// POLICY_BREACH, the breach is audited (session/policyBreach, restored),
// the effort is set back, and the next prompt runs.
func TestPolicyBreach_DriftEndsTheTurnAuditedAndSetBack(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("drift", "controls")
	p["effort"] = "low"
	var o controlsOpen
	s.mustCall("session/open", p, &o)
	f := s.await(s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "d1", "prompt": "please drift:effort=high"}), 60*time.Second)
	r := decodeResult[turnResult](t, "drift turn", f)
	if r.Status != "failed" || r.Error == nil || r.Error.Code != "POLICY_BREACH" {
		t.Fatalf("drift turn %s: want failed POLICY_BREACH", f.Result)
	}
	raw := s.waitNote("session/policyBreach", 30*time.Second, func(raw json.RawMessage) bool {
		var n struct {
			Session  string `json:"session"`
			Restored bool   `json:"restored"`
		}
		return json.Unmarshal(raw, &n) == nil && n.Session == o.Session && n.Restored
	})
	var n struct {
		RequestID *string `json:"requestId"`
		Control   string  `json:"control"`
		Held      string  `json:"held"`
		Reported  string  `json:"reported"`
	}
	_ = json.Unmarshal(raw, &n)
	if n.RequestID == nil || *n.RequestID != "d1" || n.Control != "effort" || n.Held != "low" || n.Reported != "high" {
		t.Fatalf("breach notice %s", raw)
	}
	if st := promptOK(t, s, o.Session, "d2", "hello"); st != "completed" {
		t.Fatalf("turn after the breach: %s", st)
	}
	var st struct {
		ConfigOptions []json.RawMessage `json:"configOptions"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if v := optionValue(st.ConfigOptions, "effort"); v != "low" {
		t.Fatalf("effort after the breach %q, want low set back", v)
	}
	// A host's own change is no breach: it is held from then on.
	s.mustCall("session/setConfigOption", map[string]any{"session": o.Session, "key": "effort", "value": "medium"}, nil)
	if st := promptOK(t, s, o.Session, "d3", "hello"); st != "completed" {
		t.Fatalf("turn after the host's change: %s", st)
	}
	closeRaw(t, s, o.Session)
}

// TestUsageReceipt_GrokTurnCompleted: Grok's usage notification
// (_x.ai/session_notification, turn_completed) gives the prompt result
// its usage and its cost with basis "turn" — only live, within the turn,
// for this ACP session, once, with tokens that add up; otherwise the
// result keeps the prompt answer's usage and no cost.
func TestUsageReceipt_GrokTurnCompleted(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("grok", "receipts")
	p["agent"] = "grok"
	var o controlsOpen
	s.mustCall("session/open", p, &o)
	type result struct {
		Status string `json:"status"`
		Usage  *struct {
			Input  int64  `json:"inputTokens"`
			Output int64  `json:"outputTokens"`
			Total  int64  `json:"totalTokens"`
			Cached *int64 `json:"cachedReadTokens"`
		} `json:"usage"`
		Cost *struct {
			Amount   float64 `json:"amount"`
			Currency string  `json:"currency"`
			Basis    string  `json:"basis"`
		} `json:"cost"`
	}
	run := func(rid, variant string) result {
		t.Helper()
		f := s.await(s.start("session/prompt", map[string]any{"session": o.Session, "requestId": rid, "prompt": "receipt:" + variant}), 60*time.Second)
		return decodeResult[result](t, "turn "+rid, f)
	}
	ok := run("r-ok", "ok")
	if ok.Usage == nil || ok.Usage.Input != 120 || ok.Usage.Output != 30 || ok.Usage.Total != 150 || ok.Usage.Cached == nil || *ok.Usage.Cached != 20 {
		t.Fatalf("receipt usage %+v, want 120/30/150 with 20 cached", ok.Usage)
	}
	if ok.Cost == nil || ok.Cost.Basis != "turn" || ok.Cost.Currency != "USD" || ok.Cost.Amount < 0.41396 || ok.Cost.Amount > 0.41398 {
		t.Fatalf("receipt cost %+v, want 0.41397 USD basis turn", ok.Cost)
	}
	for _, v := range []string{"replay", "bad", "twice", "other", "late"} {
		r := run("r-"+v, v)
		if r.Cost != nil || r.Usage == nil || r.Usage.Total != 15 {
			t.Errorf("receipt %s was accepted: usage %+v cost %+v (want the prompt answer's 15 tokens and no cost)", v, r.Usage, r.Cost)
		}
	}
	closeRaw(t, s, o.Session)
}
