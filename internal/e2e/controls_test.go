package e2e

// Control and accounting tests (issue 5; PROTOCOL §4 session/open model,
// session/setModel, setMode, setConfigOption, session/status usage/cost,
// §4 session/prompt usage/cost). The fault agent offers models fa-model
// (current) and fa-large, modes default (current) and plan, and one config
// option `model`; the real codex-acp offers its models only as the config
// option `model` (internal/modelstub/testdata/codex-transcript.md).

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// controlModels / controlModes are the {models} / {modes} shapes
// (PROTOCOL §4).
type controlModels struct {
	CurrentModelID    string   `json:"currentModelId"`
	AvailableModelIDs []string `json:"availableModelIds"`
}

type controlModes struct {
	CurrentModeID    string   `json:"currentModeId"`
	AvailableModeIDs []string `json:"availableModeIds"`
}

type usageJSON struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	TotalTokens  int64 `json:"totalTokens"`
}

type costJSON struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	Basis    string  `json:"basis"`
}

// statusJSON is the part of session/status these tests read.
type statusJSON struct {
	State         string            `json:"state"`
	Models        *controlModels    `json:"models"`
	Modes         *controlModes     `json:"modes"`
	ConfigOptions []json.RawMessage `json:"configOptions"`
	Usage         struct {
		Cumulative usageJSON            `json:"cumulative"`
		PerRequest map[string]usageJSON `json:"perRequest"`
	} `json:"usage"`
	Cost *costJSON `json:"cost"`
}

// promptUsage is a session/prompt result with usage and cost.
type promptUsage struct {
	Status string     `json:"status"`
	Usage  *usageJSON `json:"usage"`
	Cost   *costJSON  `json:"cost"`
}

func statusOf(s *sidecar, session string) statusJSON {
	s.t.Helper()
	var st statusJSON
	s.mustCall("session/status", map[string]any{"session": session}, &st)
	return st
}

// optionValue returns the currentValue of config option id, or "".
func optionValue(opts []json.RawMessage, id string) string {
	for _, raw := range opts {
		var o struct {
			ID           string `json:"id"`
			CurrentValue string `json:"currentValue"`
		}
		if json.Unmarshal(raw, &o) == nil && o.ID == id {
			return o.CurrentValue
		}
	}
	return ""
}

// runTurn runs one turn and requires status completed.
func runTurn(t *testing.T, s *sidecar, session, requestID, prompt string) promptUsage {
	t.Helper()
	res := decodeResult[promptUsage](t, "turn "+requestID,
		s.call("session/prompt", map[string]any{"session": session, "requestId": requestID, "prompt": prompt}))
	if res.Status != "completed" {
		t.Fatalf("turn %s: %+v, want completed", requestID, res)
	}
	return res
}

// TestControls_SetModelVerifiedAndPersisted: session/setModel to an offered
// model answers {models} with it current, and session/status (read from
// the persisted record) shows it (PROTOCOL §4 setModel; issue 5).
func TestControls_SetModelVerifiedAndPersisted(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "ctl-model", "")
	var res struct {
		Models controlModels `json:"models"`
	}
	s.mustCall("session/setModel", map[string]any{"session": o.Session, "model": "fa-large"}, &res)
	if res.Models.CurrentModelID != "fa-large" {
		t.Errorf("setModel result models %+v, want current fa-large", res.Models)
	}
	st := statusOf(s, o.Session)
	if st.Models == nil || st.Models.CurrentModelID != "fa-large" {
		t.Errorf("status models %+v, want current fa-large", st.Models)
	}
	if v := optionValue(st.ConfigOptions, "model"); v != "fa-large" {
		t.Errorf("status configOptions model = %q, want fa-large (the agent's own report)", v)
	}
	closeClean(t, s, o.Session, e.mark, e.work)
}

// TestControls_SetModelUnavailableKeepsSessionUsable: a model the agent
// does not offer is -32000 MODEL_UNAVAILABLE, the current model is kept
// and the session still runs a turn (PROTOCOL §3, §4 setModel; issue 5).
func TestControls_SetModelUnavailableKeepsSessionUsable(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "ctl-model-nope", "")
	wantError(t, "setModel nope", s.call("session/setModel", map[string]any{"session": o.Session, "model": "nope"}), -32000, "MODEL_UNAVAILABLE")
	if st := statusOf(s, o.Session); st.Models == nil || st.Models.CurrentModelID != "fa-model" {
		t.Errorf("status models after a refused setModel: %+v, want fa-model", st.Models)
	}
	runTurn(t, s, o.Session, "t1", "still there?")
	closeClean(t, s, o.Session, e.mark, e.work)
}

// TestControls_SetModeOfferedAndUnknown: setMode to an offered mode answers
// {modes} with it current (status shows it); an unknown mode is -32000
// MODE_UNAVAILABLE (PROTOCOL §4 setMode; issue 5).
func TestControls_SetModeOfferedAndUnknown(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "ctl-mode", "")
	var res struct {
		Modes controlModes `json:"modes"`
	}
	s.mustCall("session/setMode", map[string]any{"session": o.Session, "mode": "plan"}, &res)
	if res.Modes.CurrentModeID != "plan" {
		t.Errorf("setMode result %+v, want current plan", res.Modes)
	}
	if st := statusOf(s, o.Session); st.Modes == nil || st.Modes.CurrentModeID != "plan" {
		t.Errorf("status modes %+v, want plan", st.Modes)
	}
	wantError(t, "setMode nope", s.call("session/setMode", map[string]any{"session": o.Session, "mode": "nope"}), -32000, "MODE_UNAVAILABLE")
	runTurn(t, s, o.Session, "t1", "after the refused mode")
	closeClean(t, s, o.Session, e.mark, e.work)
}

// TestControls_SetConfigOption: an offered option is set and verified
// ({configOptions} shows the value); an unknown key is -32000
// UNSUPPORTED_CONTROL (PROTOCOL §4 setConfigOption; issue 5).
func TestControls_SetConfigOption(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "ctl-option", "")
	var res struct {
		ConfigOptions []json.RawMessage `json:"configOptions"`
	}
	s.mustCall("session/setConfigOption", map[string]any{"session": o.Session, "key": "model", "value": "fa-large"}, &res)
	if v := optionValue(res.ConfigOptions, "model"); v != "fa-large" {
		t.Errorf("setConfigOption result model = %q, want fa-large", v)
	}
	wantError(t, "setConfigOption unknown key",
		s.call("session/setConfigOption", map[string]any{"session": o.Session, "key": "no-such-option", "value": "x"}), -32000, "UNSUPPORTED_CONTROL")
	runTurn(t, s, o.Session, "t1", "after the refused option")
	closeClean(t, s, o.Session, e.mark, e.work)
}

// TestControls_OpenWithModelSelectsIt: session/open with model selects it
// after the handshake and reports it current (PROTOCOL §4 session/open
// model; issue 5).
func TestControls_OpenWithModelSelectsIt(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("ctl-open-model", "")
	p["model"] = "fa-large"
	var o struct {
		Session string        `json:"session"`
		Models  controlModels `json:"models"`
	}
	s.mustCall("session/open", p, &o)
	if o.Models.CurrentModelID != "fa-large" {
		t.Errorf("open result models %+v, want current fa-large", o.Models)
	}
	if st := statusOf(s, o.Session); st.Models == nil || st.Models.CurrentModelID != "fa-large" {
		t.Errorf("status models %+v, want fa-large", st.Models)
	}
	closeClean(t, s, o.Session, e.mark, e.work)
}

// TestControls_OpenWithUnavailableModelCleansUp: session/open with a model
// the agent does not offer fails -32000 MODEL_UNAVAILABLE; the launched
// provider is cleaned up (data.cleanup complete) and nothing of it lives
// (PROTOCOL §3 "a failure that launched anything carries data.cleanup",
// §4 session/open model; issue 5).
func TestControls_OpenWithUnavailableModelCleansUp(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("ctl-open-nope", "")
	p["model"] = "nope"
	d := wantError(t, "open with model nope", s.call("session/open", p), -32000, "MODEL_UNAVAILABLE")
	if d.Cleanup == nil || !d.Cleanup.Complete || !d.Cleanup.Verified.TreeEmpty {
		t.Errorf("error data.cleanup %+v, want a complete proof", d.Cleanup)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestControls_CodexSetModelFromConfigOption: with the real codex-acp,
// setModel to a model its `model` config option lists is verified (result,
// status and the agent's option agree); a model it does not list is
// MODEL_UNAVAILABLE and the session still runs a turn (PROTOCOL §4
// setModel; issue 5).
func TestControls_CodexSetModelFromConfigOption(t *testing.T) {
	agent, codexHome, _ := codexEnv(t)
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	var o struct {
		Session string        `json:"session"`
		Models  controlModels `json:"models"`
	}
	s.mustCall("session/open", map[string]any{"sessionKey": "codex-model", "agent": "codex", "command": map[string]any{"path": agent},
		"cwd": e.work, "env": map[string]string{"OPENAI_API_KEY": "sk-" + randHex(8), "CODEX_HOME": codexHome, "HOME": codexHome, "ACPX_TEST_MARK": e.mark}}, &o)
	const target = "gpt-5.4-mini" // listed in codex-transcript.md
	if !contains(o.Models.AvailableModelIDs, target) || o.Models.CurrentModelID == target {
		t.Fatalf("open models %+v: want %s offered and not current", o.Models, target)
	}
	var res struct {
		Models controlModels `json:"models"`
	}
	s.mustCall("session/setModel", map[string]any{"session": o.Session, "model": target}, &res)
	if res.Models.CurrentModelID != target {
		t.Errorf("setModel result %+v, want current %s", res.Models, target)
	}
	st := statusOf(s, o.Session)
	if st.Models == nil || st.Models.CurrentModelID != target {
		t.Errorf("status models %+v, want %s", st.Models, target)
	}
	if v := optionValue(st.ConfigOptions, "model"); v != target {
		t.Errorf("status configOptions model = %q, want %s", v, target)
	}
	wantError(t, "codex setModel not listed",
		s.call("session/setModel", map[string]any{"session": o.Session, "model": "gpt-0-not-listed"}), -32000, "MODEL_UNAVAILABLE")
	if st := statusOf(s, o.Session); st.Models == nil || st.Models.CurrentModelID != target {
		t.Errorf("status models after the refusal %+v, want %s kept", st.Models, target)
	}
	runTurn(t, s, o.Session, "t1", "say hello")
	closeClean(t, s, o.Session, e.mark, e.work)
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestUsage_PerTurnCumulativeAndCostSurviveResume: a turn's result carries
// the agent's usage and the usage_update cost with basis "turn"; status
// carries the cumulative usage, per-request usage and the cost with basis
// "session-cumulative"; after close and a resumed reopen of the same key,
// status reports the persisted cumulative usage and cost and the next turn
// adds to them (PROTOCOL §4 session/prompt, session/status; issue 5).
func TestUsage_PerTurnCumulativeAndCostSurviveResume(t *testing.T) {
	e := newFaultEnv(t)
	agentState := t.TempDir()
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	const cost = 0.0125
	p := e.openParams("usage", "")
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
