package main

import (
	"encoding/json"
	"errors"
	"strings"
)

// authModes holds the mode auth=<id>[:<ENV>][;<id>...]: initialize
// advertises those ACP authMethods (type env_var when ENV is given), and
// session/new fails with -32000 "Authentication required" until an
// advertised method was authenticated (as codex-acp 0.16 does; docs/agents.md, Codex legacy).
type authModes struct {
	// loadResetsControls (mode load-resets-controls): session/load reports
	// the default model and mode, as an agent that does not persist them.
	loadResetsControls bool
	// loadWithoutModes (mode load-without-modes): session/load and
	// session/resume answers carry no modes (as some agents' do).
	loadWithoutModes bool
	// resume (mode resume): advertise sessionCapabilities.resume and answer
	// session/resume with the session's state, replaying nothing.
	resume bool
	// recall (mode recall): every turn's first message chunk after the
	// greeting is "recall: <n> earlier prompts: <p1>|<p2>…", the prompts
	// of the session's earlier turns — so a host sees whether a process
	// that loaded or resumed the session remembers it (docs/protocol.md
	// §24).
	recall bool

	authMethods []authMethod
	authed      string // the methodId authenticated (guarded by agent.mu)
}

type authMethod struct{ id, env string }

func (m *authModes) parseAuth(val string, hasVal bool) error {
	if !hasVal || val == "" {
		return errors.New("mode auth needs =<id>[:<ENV>][;<id>...]")
	}
	for _, part := range strings.Split(val, ";") {
		id, env, _ := strings.Cut(part, ":")
		if id == "" {
			return errors.New("mode auth: empty method id")
		}
		m.authMethods = append(m.authMethods, authMethod{id, env})
	}
	return nil
}

// advertised is the initialize result's authMethods.
func (m *authModes) advertised() []any {
	out := []any{}
	for _, am := range m.authMethods {
		v := map[string]any{"id": am.id, "name": am.id}
		if am.env != "" {
			v["type"] = "env_var"
			v["vars"] = []any{map[string]any{"name": am.env}}
		}
		out = append(out, v)
	}
	return out
}

// authenticate answers ACP authenticate: ok for an advertised method.
func (a *agent) authenticate(m message) {
	var p struct {
		MethodID string `json:"methodId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	if a.cfg.authFail {
		a.fail(m.ID, -32000, "authentication failed for "+p.MethodID)
		return
	}
	for _, am := range a.cfg.authMethods {
		if am.id == p.MethodID {
			a.mu.Lock()
			a.cfg.authed = p.MethodID
			a.mu.Unlock()
			a.reply(m.ID, map[string]any{})
			return
		}
	}
	a.fail(m.ID, -32602, "unknown auth method "+p.MethodID)
}

// needsAuth reports whether session/new must be refused for lack of
// authentication.
func (a *agent) needsAuth() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cfg.authMethods) > 0 && a.cfg.authed == ""
}
