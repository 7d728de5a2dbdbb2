package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Names and values the agent reports; tests match on them.
const (
	agentName     = "faultagent"
	agentVersion  = "0.1.0"
	helloText     = "hello from faultagent"
	defaultModel  = "fa-model"
	largeModel    = "fa-large"
	defaultModeID = "default"
	contextSize   = 1000
)

// JSON-RPC error codes used by the agent (JSON-RPC 2.0 §5.1; ACP uses
// -32002 for an unknown resource).
const (
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeNotFound       = -32002
)

// message is one JSON-RPC 2.0 message in either direction.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// session is one ACP session the agent holds.
type session struct {
	ID      string            `json:"sessionId"`
	Model   string            `json:"model"`
	Mode    string            `json:"mode"`
	History []json.RawMessage `json:"history"` // recorded `update` objects, in order
	Turns   int               `json:"turns"`   // prompts run (mode cost)

	cancel chan struct{} // closed by session/cancel; nil when no turn runs
}

type agent struct {
	cfg config

	outMu   sync.Mutex
	out     io.Writer
	garbage int

	mu       sync.Mutex
	sessions map[string]*session
	nextID   int
	pending  map[string]chan message // our requests awaiting a response
	eof      bool                    // stdin ended: no response can arrive

	inflight sync.WaitGroup // request handlers still running

	rec        *recorder     // mode record; nil records nothing
	term       chan struct{} // closed at the first trapped SIGTERM
	closeFails int           // session/close requests failed (mode error-close)
}

func newAgent(cfg config, out io.Writer) *agent {
	return &agent{cfg: cfg, out: out, sessions: map[string]*session{}, pending: map[string]chan message{},
		term: make(chan struct{})}
}

// serve reads messages until r ends; requests run in their own goroutine
// so that a turn can be cancelled while it runs. At the end of r it fails
// our pending requests and waits for the running handlers (hang-* handlers
// return without answering, so they do not hold it up).
func (a *agent) serve(r io.Reader) error {
	err := readLines(r, a.handleLine)
	a.mu.Lock()
	a.eof = true
	for id, ch := range a.pending {
		ch <- message{Error: &rpcError{Code: -32603, Message: "client went away"}}
		delete(a.pending, id)
	}
	a.mu.Unlock()
	a.inflight.Wait()
	return err
}

func (a *agent) handleLine(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		logf("recv unparsable line (%d bytes): %v", len(line), err)
		return
	}
	a.rec.msg("recv", line)
	if m.Method == "" {
		logf("recv response id=%s", m.ID)
		a.mu.Lock()
		ch := a.pending[string(m.ID)]
		delete(a.pending, string(m.ID))
		a.mu.Unlock()
		if ch != nil {
			ch <- m
		}
		return
	}
	logf("recv %s id=%s", m.Method, m.ID)
	if len(m.ID) == 0 {
		a.notification(m)
		return
	}
	a.inflight.Add(1)
	go func() {
		defer a.inflight.Done()
		a.request(m)
	}()

}

// write sends one message as one line (after a garbage line in
// garbage-stdout mode).
func (a *agent) write(m message) {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		logf("marshal: %v", err)
		return
	}
	a.outMu.Lock()
	defer a.outMu.Unlock()
	if a.cfg.garbageStdout {
		a.garbage++
		fmt.Fprintf(a.out, "faultagent garbage line %d: this is not JSON\n", a.garbage)
	}
	a.rec.msg("sent", b)
	if _, err := a.out.Write(append(b, '\n')); err != nil {
		logf("write stdout: %v", err)
	}
}

func (a *agent) reply(id json.RawMessage, result any) {
	b, err := json.Marshal(result)
	if err != nil {
		logf("marshal result: %v", err)
		return
	}
	a.write(message{ID: id, Result: b})
}

func (a *agent) fail(id json.RawMessage, code int, msg string) {
	a.write(message{ID: id, Error: &rpcError{Code: code, Message: msg}})
}

// call sends a request to the client and waits for its response.
func (a *agent) call(method string, params any) message {
	p, _ := json.Marshal(params)
	a.mu.Lock()
	if a.eof {
		a.mu.Unlock()
		return message{Error: &rpcError{Code: -32603, Message: "client went away"}}
	}
	a.nextID++
	id := json.RawMessage(strconv.Itoa(a.nextID))
	ch := make(chan message, 1)
	a.pending[string(id)] = ch
	a.mu.Unlock()
	a.write(message{ID: id, Method: method, Params: p})
	return <-ch
}

func (a *agent) notification(m message) {
	switch m.Method {
	case "session/cancel":
		a.mu.Lock()
		a.cancelTurnLocked(sessionIDOf(m.Params))
		a.mu.Unlock()
	default:
		// Unknown notifications are ignored (JSON-RPC 2.0 §4.1).
	}
}

func (a *agent) request(m message) {
	switch m.Method {
	case "initialize":
		a.initialize(m)
	case "authenticate":
		a.authenticate(m)
	case "session/new":
		if a.needsAuth() {
			a.fail(m.ID, -32000, "Authentication required")
			return
		}
		a.newSession(m)
	case "session/load":
		a.loadSession(m, true)
	case "session/resume":
		if !a.cfg.resume {
			a.fail(m.ID, codeMethodNotFound, "method not found: session/resume")
			return
		}
		a.loadSession(m, false)
	case "session/prompt":
		a.prompt(m)
	case "session/close":
		a.closeSession(m)
	case "session/set_model":
		a.setModel(m)
	case "session/set_config_option":
		a.setConfigOption(m)
	case "session/set_mode":
		a.setMode(m)
	default:
		a.fail(m.ID, codeMethodNotFound, "method not found: "+m.Method)
	}
}

func (a *agent) initialize(m message) {
	if a.cfg.hangInitialize {
		logf("hang-initialize: not answering")
		return
	}
	var p struct {
		ProtocolVersion int `json:"protocolVersion"`
	}
	_ = json.Unmarshal(m.Params, &p)
	caps := map[string]any{"loadSession": true}
	sc := map[string]any{}
	if !a.cfg.closeUnsupported {
		sc["close"] = map[string]any{}
	}
	if a.cfg.resume {
		sc["resume"] = map[string]any{}
	}
	caps["sessionCapabilities"] = sc
	a.reply(m.ID, map[string]any{
		"protocolVersion":   1,
		"agentInfo":         map[string]any{"name": agentName, "version": agentVersion},
		"agentCapabilities": caps,
		"authMethods":       a.cfg.advertised(),
	})
}

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
		st["configOptions"] = configOptions(s)
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
	if !a.cfg.noSessionID {
		res["sessionId"] = s.ID
	}
	if a.cfg.agentSessionID != "" {
		res["_meta"] = map[string]any{"agentSessionId": a.cfg.agentSessionID}
	}
	a.reply(m.ID, res)
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

// persist writes the session to the state dir, if one is set.
func (a *agent) persist(s *session) {
	if a.cfg.stateDir == "" {
		return
	}
	a.mu.Lock()
	b, err := json.Marshal(s)
	a.mu.Unlock()
	if err == nil {
		err = os.WriteFile(filepath.Join(a.cfg.stateDir, s.ID+".json"), b, 0o600)
	}
	if err != nil {
		logf("persist %s: %v", s.ID, err)
	}
}

// loadSession answers session/load (replay true: the recorded updates are
// sent first) and session/resume (replay false).
func (a *agent) loadSession(m message, replay bool) {
	s, ok := a.lookup(m.Params)
	if !ok {
		a.fail(m.ID, codeNotFound, "session not found")
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
	a.mu.Unlock()
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
	s, ok := a.lookup(m.Params)
	if !ok {
		a.fail(m.ID, codeNotFound, "session not found")
		return
	}
	var p struct {
		ModelID string `json:"modelId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	if !validModel(p.ModelID) {
		a.fail(m.ID, codeInvalidParams, "unknown model")
		return
	}
	a.mu.Lock()
	s.Model = p.ModelID
	a.mu.Unlock()
	a.persist(s)
	a.reply(m.ID, map[string]any{})
}

func (a *agent) setConfigOption(m message) {
	s, ok := a.lookup(m.Params)
	if !ok {
		a.fail(m.ID, codeNotFound, "session not found")
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
	opts := configOptions(s)
	a.mu.Unlock()
	a.persist(s)
	a.reply(m.ID, map[string]any{"configOptions": opts})
}

func (a *agent) setMode(m message) {
	s, ok := a.lookup(m.Params)
	if !ok {
		a.fail(m.ID, codeNotFound, "session not found")
		return
	}
	var p struct {
		ModeID string `json:"modeId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	if p.ModeID != defaultModeID && p.ModeID != "plan" {
		a.fail(m.ID, codeInvalidParams, "unknown mode")
		return
	}
	a.mu.Lock()
	s.Mode = p.ModeID
	a.mu.Unlock()
	a.persist(s)
	a.reply(m.ID, map[string]any{})
}

// sendUpdate writes one session/update notification; update is the
// `update` object.
func (a *agent) sendUpdate(sessionID string, update json.RawMessage) {
	p, _ := json.Marshal(map[string]any{"sessionId": sessionID, "update": update})
	a.write(message{Method: "session/update", Params: p})
}

func chunk(kind, text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"sessionUpdate": kind,
		"content":       map[string]any{"type": "text", "text": text},
	})
	return b
}

func (a *agent) prompt(m message) {
	s, ok := a.lookup(m.Params)
	if !ok {
		a.fail(m.ID, codeNotFound, "session not found")
		return
	}
	var p struct {
		Prompt []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
	}
	_ = json.Unmarshal(m.Params, &p)
	var userText strings.Builder
	for _, b := range p.Prompt {
		userText.WriteString(b.Text)
	}
	cancel := make(chan struct{})
	a.mu.Lock()
	if s.cancel != nil {
		a.mu.Unlock()
		a.fail(m.ID, codeInvalidParams, "a turn is already running")
		return
	}
	s.cancel = cancel
	s.Turns++
	turns := s.Turns
	s.History = append(s.History, chunk("user_message_chunk", userText.String()))
	a.mu.Unlock()

	first := true
	emit := func(u json.RawMessage) {
		a.mu.Lock()
		s.History = append(s.History, u)
		a.mu.Unlock()
		a.sendUpdate(s.ID, u)
		if first && a.cfg.crashMidTurn {
			logf("crash-mid-turn: exit 3")
			os.Exit(3)
		}
		first = false
	}
	cancelled := func() bool {
		select {
		case <-cancel:
			return true
		default:
			return false
		}
	}

	emit(chunk("agent_message_chunk", helloText))
	if a.cfg.permissionKind != "" && !cancelled() {
		emit(chunk("agent_message_chunk", a.askPermission(s.ID)))
	}
	if a.cfg.permissionTitle != "" && !cancelled() {
		emit(chunk("agent_message_chunk", a.askTitledPermission(s.ID)))
	}
	for i := 0; i < a.cfg.flood && !cancelled(); i++ {
		emit(chunk("agent_message_chunk", fmt.Sprintf("flood %d;", i)))
	}
	if a.cfg.longLine > 0 && !cancelled() {
		emit(chunk("agent_message_chunk", strings.Repeat("x", a.cfg.longLine)))
	}
	if a.cfg.slowTurn > 0 {
		t := time.NewTimer(a.cfg.slowTurn)
		select {
		case <-t.C:
		case <-cancel:
			t.Stop()
		}
	}
	emit(a.withSeedCost(a.usageUpdate(), turns))

	stop := "end_turn"
	if cancelled() {
		stop = "cancelled"
	}
	a.mu.Lock()
	s.cancel = nil
	a.mu.Unlock()
	a.persist(s)
	a.reply(m.ID, map[string]any{
		"stopReason": stop,
		"usage":      map[string]any{"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
	})
}

// askPermission sends session/request_permission and returns the chunk
// text "permission: <outcome> <optionId>" (optionId empty unless selected).
func (a *agent) askPermission(sessionID string) string {
	toolCall := map[string]any{"toolCallId": "fa-call-1", "title": "faultagent tool (" + a.cfg.permissionKind + ")",
		"kind": a.cfg.permissionKind, "status": "pending"}
	return a.requestPermission(sessionID, toolCall, "allow_once", "allow_always", "reject_once", "reject_always")
}

// requestPermission sends session/request_permission for toolCall with one
// option per ACP option kind (optionId = the kind with '-' for '_') and
// returns the chunk text "permission: <outcome> <optionId>".
func (a *agent) requestPermission(sessionID string, toolCall map[string]any, kinds ...string) string {
	names := map[string]string{"allow_once": "Allow once", "allow_always": "Allow always",
		"reject_once": "Reject once", "reject_always": "Reject always"}
	options := []any{}
	for _, k := range kinds {
		options = append(options, map[string]any{"optionId": strings.ReplaceAll(k, "_", "-"), "name": names[k], "kind": k})
	}
	params := map[string]any{"sessionId": sessionID, "toolCall": toolCall, "options": options}
	resp := a.call("session/request_permission", params)
	if resp.Error != nil {
		return fmt.Sprintf("permission: error %d", resp.Error.Code)
	}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	_ = json.Unmarshal(resp.Result, &r)
	return strings.TrimSpace(fmt.Sprintf("permission: %s %s", r.Outcome.Outcome, r.Outcome.OptionID))
}
