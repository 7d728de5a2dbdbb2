package e2e

// Controls (docs/protocol.md, session/open model, session/setModel,
// session/setMode, session/setConfigOption; docs/rules.md#r24). The fault
// agent offers models fa-model (current) and fa-large, modes default
// (current) and plan, and one config option `model`; the real codex-acp
// offers its models only as the config option `model`
// (internal/modelstub/testdata/codex-transcript.md).

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestControls_SetModelVerifiedAndPersisted: session/setModel to an offered
// model answers {models} with it current, and session/status (read from the
// persisted record) shows it (docs/protocol.md, session/setModel).
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

// TestControls_SetModelUnavailableKeepsSessionUsable: a model the agent does
// not offer is -32000 MODEL_UNAVAILABLE, the current model is kept and the
// session still runs a turn (docs/protocol.md, Error model and
// session/setModel).
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
// MODE_UNAVAILABLE (docs/protocol.md, session/setMode).
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
// UNSUPPORTED_CONTROL (docs/protocol.md, session/setConfigOption).
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
// after the handshake and reports it current (docs/protocol.md, session/open
// model).
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
// (docs/protocol.md, Error model: a failure that launched anything carries
// data.cleanup; session/open model).
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
// MODEL_UNAVAILABLE and the session still runs a turn (docs/protocol.md,
// session/setModel).
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

// TestRunning_SetModelThroughConfigOptionThenVerified (docs/rules.md#r24):
// setModel goes through the agent's `model` config option
// (session/set_config_option, never session/set_model, when the option
// exists) and is verified against the option the agent reports back: an
// agent that says yes but keeps the old value gets MODEL_UNAVAILABLE and the
// recorded model is unchanged; without a model option the legacy
// session/set_model is used; an unknown model is refused without asking the
// agent.
func TestRunning_SetModelThroughConfigOptionThenVerified(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	type models struct {
		Models struct {
			CurrentModelID string `json:"currentModelId"`
		} `json:"models"`
	}
	current := func(session string) string {
		var st models
		s.mustCall("session/status", map[string]any{"session": session}, &st)
		return st.Models.CurrentModelID
	}

	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "set-model", rec, ""))
	var m models
	s.mustCall("session/setModel", map[string]any{"session": o.Session, "model": "fa-large"}, &m)
	if m.Models.CurrentModelID != "fa-large" || current(o.Session) != "fa-large" {
		t.Errorf("setModel fa-large: result %q status %q", m.Models.CurrentModelID, current(o.Session))
	}
	msgs := seedReadAgent(t, rec)
	if sets := seedRecv(msgs, "session/set_config_option"); len(sets) != 1 || !strings.Contains(string(sets[0].Msg.Params), `"configId":"model"`) {
		t.Errorf("set_config_option requests %v, want one for configId model", sets)
	}
	if n := len(seedRecv(msgs, "session/set_model")); n != 0 {
		t.Errorf("legacy session/set_model used %d times although the model option exists", n)
	}
	seedWantError(t, "setModel to an unknown model", s.call("session/setModel", map[string]any{"session": o.Session, "model": "nope"}),
		-32000, "MODEL_UNAVAILABLE")
	if n := len(seedRecv(seedReadAgent(t, rec), "session/set_config_option")); n != 1 {
		t.Errorf("an unknown model was sent to the agent (%d set_config_option)", n)
	}

	stale := seedMustOpen(s, e.openParams("stale-model", "stale-config"))
	seedWantError(t, "setModel the agent does not apply", s.call("session/setModel", map[string]any{"session": stale.Session, "model": "fa-large"}),
		-32000, "MODEL_UNAVAILABLE")
	if c := current(stale.Session); c != "fa-model" {
		t.Errorf("unverified model selection recorded: status model %q, want fa-model", c)
	}

	rec = seedRecordFile(t)
	legacy := seedMustOpen(s, seedOpenParams(e, "legacy-model", rec, "no-config-options"))
	s.mustCall("session/setModel", map[string]any{"session": legacy.Session, "model": "fa-large"}, &m)
	if sets := seedRecv(seedReadAgent(t, rec), "session/set_model"); len(sets) != 1 || !strings.Contains(string(sets[0].Msg.Params), `"modelId":"fa-large"`) {
		t.Errorf("legacy set_model requests %v, want one for fa-large", sets)
	}
	if m.Models.CurrentModelID != "fa-large" {
		t.Errorf("legacy setModel result %q", m.Models.CurrentModelID)
	}
	for _, id := range []string{o.Session, stale.Session, legacy.Session} {
		seedCloseProof(t, s, id, nil)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
