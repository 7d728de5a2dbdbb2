package main

// The session methods: session/new, load and resume (with the state dir),
// close, and the model and mode controls.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "fa-" + hex.EncodeToString(b)
}

// sessionState is the models/modes/configOptions part of session results.
func (a *agent) sessionState(s *session) map[string]any {
	st := map[string]any{
		"models": map[string]any{
			"currentModelId": s.Model,
			"availableModels": []any{
				map[string]any{"modelId": defaultModel, "name": "FA"},
				map[string]any{"modelId": largeModel, "name": "FA large"},
			},
		},
		"modes": map[string]any{
			"currentModeId": s.Mode,
			"availableModes": []any{
				map[string]any{"id": defaultModeID, "name": "Default"},
				map[string]any{"id": "plan", "name": "Plan"},
			},
		},
	}
	if !a.cfg.noConfigOptions {
		st["configOptions"] = a.withBoolean(configOptions(s), s)
	}
	return st
}

func configOptions(s *session) []any {
	return []any{map[string]any{
		"id": "model", "name": "Model", "category": "model", "type": "select",
		"currentValue": s.Model,
		"options": []any{
			map[string]any{"value": defaultModel, "name": "FA"},
			map[string]any{"value": largeModel, "name": "FA large"},
		},
	}}
}

func (a *agent) newSession(m message) {
	if a.cfg.hangNew {
		logf("hang-new: not answering")
		return
	}
	if a.cfg.errorNew != "" {
		a.fail(m.ID, -32603, os.ExpandEnv(a.cfg.errorNew))
		return
	}
	if a.cfg.lateNew > 0 {
		time.Sleep(a.cfg.lateNew)
	}
	if a.cfg.newOnTerm {
		logf("new-on-term: answering session/new after SIGTERM")
		<-a.term
	}
	s := &session{ID: randomID(), Model: defaultModel, Mode: defaultModeID}
	a.mu.Lock()
	a.sessions[s.ID] = s
	res := a.sessionState(s)
	a.mu.Unlock()
	a.persist(s)
	a.extNotifyNew(s.ID) // modes_ext.go
	if !a.cfg.noSessionID {
		res["sessionId"] = s.ID
	}
	if a.cfg.agentSessionID != "" {
		res["_meta"] = map[string]any{"agentSessionId": a.cfg.agentSessionID}
	}
	a.reply(m.ID, res)
}

// sessionOf is the session m's params name (lookup), or, answering m
// "session not found", false: the first step of every session method.
func (a *agent) sessionOf(m message) (*session, bool) {
	s, ok := a.lookup(m.Params)
	if !ok {
		a.fail(m.ID, codeNotFound, "session not found")
	}
	return s, ok
}

// lookup returns the session named in params, loading it from the state
// dir when this process does not hold it.
func (a *agent) lookup(params json.RawMessage) (*session, bool) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(params, &p)
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[p.SessionID]; s != nil {
		return s, true
	}
	if a.cfg.stateDir == "" || p.SessionID == "" || strings.ContainsAny(p.SessionID, "/\\") {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(a.cfg.stateDir, p.SessionID+".json"))
	if err != nil {
		return nil, false
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil || s.ID != p.SessionID {
		return nil, false
	}
	a.sessions[s.ID] = &s
	return &s, true
}

// persist writes the session to the state dir, if one is set. Handlers
// run concurrently (a turn and a control request of one session), so the
// writes are serialized and each replaces the file by a rename: two
// writes at once interleaved their bytes into a file no load could read.
func (a *agent) persist(s *session) {
	if a.cfg.stateDir == "" {
		return
	}
	a.persistMu.Lock()
	defer a.persistMu.Unlock()
	a.mu.Lock()
	b, err := json.Marshal(s)
	a.mu.Unlock()
	path := filepath.Join(a.cfg.stateDir, s.ID+".json")
	if err == nil {
		err = os.WriteFile(path+".tmp", b, 0o600)
	}
	if err == nil {
		err = os.Rename(path+".tmp", path)
	}
	if err != nil {
		logf("persist %s: %v", s.ID, err)
	}
}

// loadSession answers session/load (replay true: the recorded updates are
// sent first) and session/resume (replay false).
func (a *agent) loadSession(m message, replay bool) {
	s, ok := a.sessionOf(m)
	if !ok {
		return
	}
	a.mu.Lock()
	history := append([]json.RawMessage{}, s.History...)
	if a.cfg.loadResetsControls {
		s.Model, s.Mode = defaultModel, defaultModeID
	}
	a.mu.Unlock()
	for _, u := range history {
		if replay {
			a.sendUpdate(s.ID, u)
		}
	}
	a.mu.Lock()
	res := a.sessionState(s)
	a.mu.Unlock()
	if a.cfg.loadWithoutModes {
		delete(res, "modes")
	}
	a.reply(m.ID, res)
}

func (a *agent) closeSession(m message) {
	if a.cfg.closeUnsupported {
		a.fail(m.ID, codeMethodNotFound, "method not found: session/close")
		return
	}
	if a.cfg.hangClose {
		logf("hang-close: not answering")
		return
	}
	if a.cfg.closeErrorOnTerm {
		logf("close-error-on-term: answering session/close after SIGTERM")
		<-a.term
		a.fail(m.ID, -32603, "faultagent: late close failure")
		return
	}
	a.mu.Lock()
	failIt := a.closeFails < a.cfg.errorClose
	if failIt {
		a.closeFails++
	}
	slow := a.cfg.slowErrorCloseMs > 0 && !a.slowCloseDone
	a.slowCloseDone = a.slowCloseDone || slow
	a.mu.Unlock()
	if slow {
		logf("slow-error-close: failing the first session/close after %d ms", a.cfg.slowErrorCloseMs)
		time.AfterFunc(time.Duration(a.cfg.slowErrorCloseMs)*time.Millisecond, func() {
			a.fail(m.ID, -32603, "faultagent: slow close failed")
		})
		return
	}
	if failIt {
		a.fail(m.ID, -32603, "faultagent: close failed")
		return
	}
	id := sessionIDOf(m.Params)
	a.mu.Lock()
	a.cancelTurnLocked(id)
	delete(a.sessions, id)
	a.mu.Unlock()
	a.reply(m.ID, map[string]any{})
}

// sessionIDOf reads params.sessionId.
func sessionIDOf(params json.RawMessage) string {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(params, &p)
	return p.SessionID
}

// cancelTurnLocked ends the running turn of session id, if any (a.mu held).
func (a *agent) cancelTurnLocked(id string) {
	if s := a.sessions[id]; s != nil && s.cancel != nil {
		select {
		case <-s.cancel:
		default:
			close(s.cancel)
		}
	}
}

func validModel(id string) bool { return id == defaultModel || id == largeModel }

func (a *agent) setModel(m message) {
	var p struct {
		ModelID string `json:"modelId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	a.setSessionControl(m, validModel(p.ModelID), "unknown model", func(s *session) { s.Model = p.ModelID })
}

// setSessionControl answers session/set_model and session/set_mode for
// the session m names: -32602 why unless valid, else set applied under
// a.mu, the session persisted and {} answered.
func (a *agent) setSessionControl(m message, valid bool, why string, set func(*session)) {
	s, ok := a.sessionOf(m)
	if !ok {
		return
	}
	if !valid {
		a.fail(m.ID, codeInvalidParams, why)
		return
	}
	a.mu.Lock()
	set(s)
	a.mu.Unlock()
	a.persist(s)
	a.reply(m.ID, map[string]any{})
}

func (a *agent) setConfigOption(m message) {
	s, ok := a.sessionOf(m)
	if !ok {
		return
	}
	if a.setBoolean(m, s) { // modes_ext.go
		return
	}
	if a.setControl(m, s) { // modes_controls.go
		return
	}
	var p struct {
		ConfigID string `json:"configId"`
		Value    string `json:"value"`
	}
	_ = json.Unmarshal(m.Params, &p)
	if p.ConfigID != "model" || !validModel(p.Value) {
		a.fail(m.ID, codeInvalidParams, "unknown config option or value")
		return
	}
	a.mu.Lock()
	if !a.cfg.staleConfig {
		s.Model = p.Value
	}
	opts := a.withBoolean(configOptions(s), s)
	a.mu.Unlock()
	a.persist(s)
	a.reply(m.ID, map[string]any{"configOptions": opts})
}

func (a *agent) setMode(m message) {
	var p struct {
		ModeID string `json:"modeId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	a.setSessionControl(m, p.ModeID == defaultModeID || p.ModeID == "plan", "unknown mode", func(s *session) { s.Mode = p.ModeID })
}
