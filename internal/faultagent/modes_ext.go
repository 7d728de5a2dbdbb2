package main

// The modes of docs/protocol.md §23 (extension methods, authentication,
// the agent's own sessions, capabilities):
//
//	ext-notify         session/new sends `_fa/status {"sessionId", "state":
//	                   "new"}` before answering (as codex-acp 2.6 sends
//	                   `_auth/status_update`)
//	ext-ask=<method>   each turn sends the client the request <method>
//	                   {"sessionId", "q": "ping"} and reports "ext: result
//	                   <json>" or "ext: error <code> <message> <data>"
//	caps=<a+b+...>     advertise more capabilities: list
//	                   (sessionCapabilities.list), dirs
//	                   (sessionCapabilities.additionalDirectories), image,
//	                   audio, embedded (promptCapabilities), http, sse
//	                   (mcpCapabilities)
//	auth-terminal=<id> also advertise a terminal-type auth method <id>
//	auth-fail          authenticate fails with -32000
//	tap=<file>         append every line received, byte for byte, to <file>
//
// In every mode: a request `_fa/echo` is answered {"echo": <params>},
// `_fa/fail` with error -32042 "fa refused" data {"why": "asked to"},
// other `_…` requests -32601; a `_…` notification is answered with the
// notification `_fa/seen {"method", "params"}`. session/list pages the
// sessions this agent holds or finds in its state dir, two a page, sorted
// by id, each {sessionId, cwd, title}; nextCursor is the next index.

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

type extModes struct {
	extNotify    bool
	extAsk       string
	caps         map[string]bool
	authTerminal string
	authFail     bool
	tapFile      string
}

func (c *config) parseExt(name, val string, hasVal bool) error {
	switch name {
	case "ext-notify":
		c.extNotify = true
	case "ext-ask":
		if !hasVal || !strings.HasPrefix(val, "_") {
			return errors.New("mode ext-ask needs =<_method>")
		}
		c.extAsk = val
	case "caps":
		c.caps = map[string]bool{}
		for _, k := range strings.Split(val, "+") {
			switch k {
			case "list", "dirs", "image", "audio", "embedded", "http", "sse":
				c.caps[k] = true
			default:
				return errors.New("mode caps: unknown capability " + k)
			}
		}
	case "auth-terminal":
		if !hasVal || val == "" {
			return errors.New("mode auth-terminal needs =<id>")
		}
		c.authTerminal = val
	case "auth-fail":
		c.authFail = true
	case "tap":
		if !hasVal || val == "" {
			return errors.New("mode tap needs =<file>")
		}
		c.tapFile = val
	}
	return nil
}

// tapMu serializes the tap file's appends.
var tapMu sync.Mutex

// tap appends one received line verbatim (mode tap).
func (a *agent) tap(line []byte) {
	if a.cfg.tapFile == "" {
		return
	}
	tapMu.Lock()
	defer tapMu.Unlock()
	f, err := os.OpenFile(a.cfg.tapFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		logf("tap: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(line); err != nil {
		logf("tap: %v", err)
	}
}

// extCaps adds the caps= capabilities to initialize's agentCapabilities.
func (a *agent) extCaps(caps map[string]any, sc map[string]any) {
	c := a.cfg.caps
	if c["list"] {
		sc["list"] = map[string]any{}
	}
	if c["dirs"] {
		sc["additionalDirectories"] = map[string]any{}
	}
	caps["promptCapabilities"] = map[string]any{"image": c["image"], "audio": c["audio"], "embeddedContext": c["embedded"]}
	caps["mcpCapabilities"] = map[string]any{"http": c["http"], "sse": c["sse"]}
}

// authAdvertised adds auth-terminal's method to the advertised ones.
func (a *agent) authAdvertised() []any {
	out := a.cfg.advertised()
	if a.cfg.authTerminal != "" {
		out = append(out, map[string]any{"id": a.cfg.authTerminal, "name": "Log in in a terminal", "type": "terminal"})
	}
	return out
}

// extRequest answers a `_…` request of the client.
func (a *agent) extRequest(m message) {
	switch m.Method {
	case "_fa/echo":
		params := m.Params
		if len(params) == 0 {
			params = json.RawMessage("null")
		}
		a.reply(m.ID, map[string]json.RawMessage{"echo": params})
	case "_fa/fail":
		a.write(message{ID: m.ID, Error: &rpcError{Code: -32042, Message: "fa refused", Data: json.RawMessage(`{"why":"asked to"}`)}})
	default:
		a.fail(m.ID, codeMethodNotFound, "method not found: "+m.Method)
	}
}

// extNotification answers a `_…` notification with `_fa/seen`.
func (a *agent) extNotification(m message) {
	params := m.Params
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	p, _ := json.Marshal(map[string]any{"method": m.Method, "params": params})
	a.write(message{Method: "_fa/seen", Params: p})
}

// extNotifyNew sends `_fa/status` for a new session (mode ext-notify).
func (a *agent) extNotifyNew(id string) {
	if !a.cfg.extNotify {
		return
	}
	p, _ := json.Marshal(map[string]any{"sessionId": id, "state": "new"})
	a.write(message{Method: "_fa/status", Params: p})
}

// extAskTurn sends the ext-ask request and reports its outcome.
func (a *agent) extAskTurn(sessionID string) string {
	r := a.callWithdraw(a.cfg.extAsk, map[string]any{"sessionId": sessionID, "q": "ping"}, a.cfg.extWithdraw)
	if r.Error != nil {
		return "ext: error " + strconv.Itoa(r.Error.Code) + " " + r.Error.Message + " " + string(r.Error.Data)
	}
	return "ext: result " + string(r.Result)
}

// listSessions answers session/list: the sessions held or in the state
// dir, two a page.
func (a *agent) listSessions(m message) {
	var p struct {
		Cursor string `json:"cursor"`
		Cwd    string `json:"cwd"`
	}
	_ = json.Unmarshal(m.Params, &p)
	ids := map[string]bool{}
	a.mu.Lock()
	for id := range a.sessions {
		ids[id] = true
	}
	a.mu.Unlock()
	if a.cfg.stateDir != "" {
		files, _ := filepath.Glob(filepath.Join(a.cfg.stateDir, "fa-*.json"))
		for _, f := range files {
			ids[strings.TrimSuffix(filepath.Base(f), ".json")] = true
		}
	}
	all := make([]string, 0, len(ids))
	for id := range ids {
		all = append(all, id)
	}
	sort.Strings(all)
	start := 0
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < 0 || n > len(all) {
			a.fail(m.ID, codeInvalidParams, "bad cursor")
			return
		}
		start = n
	}
	end := min(start+2, len(all))
	cwd := p.Cwd
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	page := []any{}
	for _, id := range all[start:end] {
		page = append(page, map[string]any{"sessionId": id, "cwd": cwd, "title": "faultagent " + id})
	}
	res := map[string]any{"sessions": page}
	if end < len(all) {
		res["nextCursor"] = strconv.Itoa(end)
	}
	a.reply(m.ID, res)
}

// noteBooleanOptions records whether initialize's clientCapabilities
// advertise session.configOptions.boolean: then every session carries the
// boolean config option fa-fast (ACP: an agent sends boolean options only
// to a client that takes them).
func (a *agent) noteBooleanOptions(params json.RawMessage) {
	var p struct {
		ClientCapabilities struct {
			Session *struct {
				ConfigOptions *struct {
					Boolean *json.RawMessage `json:"boolean"`
				} `json:"configOptions"`
			} `json:"session"`
		} `json:"clientCapabilities"`
	}
	_ = json.Unmarshal(params, &p)
	s := p.ClientCapabilities.Session
	a.mu.Lock()
	a.booleanOptions = s != nil && s.ConfigOptions != nil && s.ConfigOptions.Boolean != nil
	a.mu.Unlock()
}

// withBoolean appends fa-fast to opts when the client takes boolean
// options; a.mu must be held.
func (a *agent) withBoolean(opts []any, s *session) []any {
	opts = a.controlsOptions(opts, s) // modes_controls.go
	if !a.booleanOptions {
		return opts
	}
	return append(opts, map[string]any{"id": "fa-fast", "name": "Fast", "type": "boolean", "currentValue": s.Fast})
}

// setBoolean answers session/set_config_option of type boolean for
// fa-fast; false when the request is not one.
func (a *agent) setBoolean(m message, s *session) bool {
	var p struct {
		ConfigID string          `json:"configId"`
		Type     string          `json:"type"`
		Value    json.RawMessage `json:"value"`
	}
	_ = json.Unmarshal(m.Params, &p)
	if p.Type != "boolean" {
		return false
	}
	var v bool
	a.mu.Lock()
	if p.ConfigID != "fa-fast" || !a.booleanOptions || json.Unmarshal(p.Value, &v) != nil {
		a.mu.Unlock()
		a.fail(m.ID, codeInvalidParams, "unknown boolean config option or value")
		return true
	}
	s.Fast = v
	opts := a.withBoolean(configOptions(s), s)
	a.mu.Unlock()
	a.persist(s)
	a.reply(m.ID, map[string]any{"configOptions": opts})
	return true
}
