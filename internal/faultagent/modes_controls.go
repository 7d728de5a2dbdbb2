package main

import (
	"encoding/json"
	"strings"
)

// The controls mode (docs/protocol.md §24, effort, thinking and policy
// breaches; PROTOCOL §10.5):
//
//	controls   sessions also offer the select config options "effort"
//	           (low, medium, high; default medium), "thought_level" (category
//	           thought_level: off, low, high; default off) and "allow_all"
//	           (off, on; default off), settable with
//	           session/set_config_option and persisted; a turn whose prompt
//	           holds "drift:<id>=<value>" first sends a config_option_update
//	           that sets option <id> to <value> on its own, then waits for
//	           session/cancel (at most slow-turn, else 10 s)
//	receipts   a turn whose prompt holds "receipt:<variant>" sends Grok's
//	           usage notification _x.ai/session_notification {sessionId,
//	           update: {sessionUpdate: "turn_completed", prompt_id,
//	           stop_reason, usage: {inputTokens 120, outputTokens 30,
//	           totalTokens 150, cachedReadTokens 20, reasoningTokens 10,
//	           modelCalls 2, costUsdTicks 4139700000, numTurns 1}}, _meta:
//	           {isReplay: false}} before its answer: variant ok as is;
//	           replay with _meta.isReplay true; bad with totalTokens 151;
//	           twice sent two times; other with another sessionId; late
//	           sent 300 ms after the prompt's answer

// controlModes are the controls and receipts modes above.
type controlModes struct {
	controls bool // controls
	receipts bool // receipts
}

// controlDefaults are the controls mode's options: id → values (the first
// listed after the default is not special), default value.
var controlDefaults = []struct {
	id, category, def string
	values            []string
}{
	{"effort", "effort", "medium", []string{"low", "medium", "high"}},
	{"thought_level", "thought_level", "off", []string{"off", "low", "high"}},
	{"allow_all", "", "off", []string{"off", "on"}},
}

// controlsOptions appends the controls mode's options to opts; a.mu held.
func (a *agent) controlsOptions(opts []any, s *session) []any {
	if !a.cfg.controls {
		return opts
	}
	for _, c := range controlDefaults {
		vals := []any{}
		for _, v := range c.values {
			vals = append(vals, map[string]any{"value": v, "name": v})
		}
		o := map[string]any{"id": c.id, "name": c.id, "type": "select", "currentValue": s.control(c.id, c.def), "options": vals}
		if c.category != "" {
			o["category"] = c.category
		}
		opts = append(opts, o)
	}
	return opts
}

// control is option id's value in s, def when never set.
func (s *session) control(id, def string) string {
	if v, ok := s.Controls[id]; ok {
		return v
	}
	return def
}

// setControl answers session/set_config_option of a controls option;
// false when the request is not one.
func (a *agent) setControl(m message, s *session) bool {
	if !a.cfg.controls {
		return false
	}
	var p struct {
		ConfigID string `json:"configId"`
		Value    string `json:"value"`
	}
	_ = json.Unmarshal(m.Params, &p)
	for _, c := range controlDefaults {
		if c.id != p.ConfigID {
			continue
		}
		ok := false
		for _, v := range c.values {
			ok = ok || v == p.Value
		}
		if !ok {
			a.fail(m.ID, codeInvalidParams, "unknown value for "+c.id)
			return true
		}
		a.mu.Lock()
		if s.Controls == nil {
			s.Controls = map[string]string{}
		}
		s.Controls[c.id] = p.Value
		opts := a.withBoolean(configOptions(s), s)
		a.mu.Unlock()
		a.persist(s)
		a.reply(m.ID, map[string]any{"configOptions": opts})
		return true
	}
	return false
}

// drift, for a prompt holding "drift:<id>=<value>", sets that option on
// the agent's own and sends the config_option_update; it reports whether
// it did.
func (a *agent) drift(s *session, text string, emit func(json.RawMessage)) bool {
	if !a.cfg.controls {
		return false
	}
	i := strings.Index(text, "drift:")
	if i < 0 {
		return false
	}
	spec := strings.Fields(text[i+len("drift:"):])
	if len(spec) == 0 {
		return false
	}
	id, v, ok := strings.Cut(spec[0], "=")
	if !ok {
		return false
	}
	a.mu.Lock()
	if s.Controls == nil {
		s.Controls = map[string]string{}
	}
	s.Controls[id] = v
	opts := a.withBoolean(configOptions(s), s)
	a.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"sessionUpdate": "config_option_update", "configOptions": opts})
	emit(b)
	return true
}

// receiptVariant is the "receipt:<variant>" of a prompt, "" if none or the
// mode is off.
func (a *agent) receiptVariant(text string) string {
	if !a.cfg.receipts {
		return ""
	}
	i := strings.Index(text, "receipt:")
	if i < 0 {
		return ""
	}
	f := strings.Fields(text[i+len("receipt:"):])
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// sendReceipt sends the usage notification of variant (see above) for
// session id.
func (a *agent) sendReceipt(sessionID, variant string) {
	usage := map[string]any{"inputTokens": 120, "outputTokens": 30, "totalTokens": 150, "cachedReadTokens": 20,
		"reasoningTokens": 10, "modelCalls": 2, "costUsdTicks": int64(4139700000), "numTurns": 1}
	if variant == "bad" {
		usage["totalTokens"] = 151
	}
	if variant == "other" {
		sessionID = "another-session"
	}
	p, _ := json.Marshal(map[string]any{"sessionId": sessionID,
		"update": map[string]any{"sessionUpdate": "turn_completed", "prompt_id": "p-1", "stop_reason": "end_turn", "usage": usage},
		"_meta":  map[string]any{"isReplay": variant == "replay"}})
	a.write(message{Method: "_x.ai/session_notification", Params: p})
	if variant == "twice" {
		a.write(message{Method: "_x.ai/session_notification", Params: p})
	}
}
