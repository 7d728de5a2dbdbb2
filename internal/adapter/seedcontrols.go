package adapter

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The seed's admissions (docs/protocol.md §24, "Effort, thinking and
// policy breaches"; docs/agents.md, "Drift"): the open's effort and
// thinking applied through the agent's own config option and verified
// before the first prompt; the controls that keep an agent asking (its
// asking mode, Copilot's allow_all) and the open's effort and thinking
// held for the session's life — an agent that moves one ends its turn as a
// policy breach, audited, and the sidecar sets it back before the next
// prompt.

// heldMode is the held-control key of the session's mode (ACP modes or
// the config option of category "mode").
const heldMode = "mode"

// effortControl and thinkingControl are the open's members.
const (
	effortControl   = "effort"
	thinkingControl = "thinking"
)

// checkSeedOpen refuses, before anything is launched: a policy that needs
// asking for an agent that cannot ask (pi); a mode the profile never
// selects (Copilot's autopilot); effort or thinking for an agent whose
// profile says it has no such option (CONTROL_UNAVAILABLE).
func checkSeedOpen(prof profiles.Profile, p protocol.OpenParams) *protocol.Error {
	b := prof.Binding
	if b.CannotAsk != "" && needsAsking(p) {
		return unenforceable(b.CannotAsk)
	}
	if p.Mode != "" && b.Never(p.Mode) {
		return protocol.Domain(protocol.ErrModeUnavailable, "mode "+quoteShort(p.Mode)+" is never selected: "+b.NeverWhy, false)
	}
	if p.Effort != "" && prof.EffortOption == "-" {
		return controlUnavailable(prof.Name + " has no effort option (docs/agents.md)")
	}
	if p.Thinking != "" && prof.ThinkingOption == "-" {
		return controlUnavailable(prof.Name + " has no thinking option (docs/agents.md)")
	}
	return nil
}

func controlUnavailable(why string) *protocol.Error {
	return protocol.Domain(protocol.ErrControlUnavailable, why, false)
}

// seedOption finds the config option a control goes through: by id, else
// by category; spec "" is def (an id) or, for thinking, the category
// "thought_level".
func (c *controls) seedOption(control, spec string) *selectOption {
	if spec == "" {
		spec = control
		if control == thinkingControl {
			spec = "thought_level"
		}
	}
	var byCat *selectOption
	for _, raw := range c.configOpts {
		var o selectOption
		if json.Unmarshal(raw, &o) != nil {
			continue
		}
		if o.ID == spec {
			return &o
		}
		if o.Category == spec && byCat == nil {
			oc := o
			byCat = &oc
		}
	}
	return byCat
}

// optionValues lists the values o offers (flat or grouped).
func optionValues(o *selectOption) []string {
	vals := []string{}
	for _, v := range o.Options {
		if v.Value != "" {
			vals = append(vals, v.Value)
		}
		for _, g := range v.Options {
			vals = append(vals, g.Value)
		}
	}
	return vals
}

// applySeedControls runs in the handshake after the binding, on every
// new, load and resume (and revive): the binding's asking options set
// and verified when the policy needs asking; the open's effort and
// thinking set and verified (a value the agent does not offer:
// CONTROL_UNAVAILABLE). It returns the controls to hold: config option id
// (or heldMode) → value. skip names options the host set since the open
// (a revive re-applies those instead).
func (c *controls) applySeedControls(ctx context.Context, prof profiles.Profile, p protocol.OpenParams, binding protocol.PermissionBinding, skip map[string]bool) (map[string]string, *protocol.Error) {
	held := map[string]string{}
	if needsAsking(p) && binding.Bound && len(prof.Binding.AskModes) > 0 && binding.Mode != "" {
		held[heldMode] = binding.Mode
	}
	if needsAsking(p) {
		ids := make([]string, 0, len(prof.Binding.AskOptions))
		for id := range prof.Binding.AskOptions {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			want := prof.Binding.AskOptions[id]
			o := c.seedOption(id, id)
			if o == nil || o.ID != id {
				continue // the agent has no such switch: nothing to hold
			}
			if o.CurrentValue != want {
				bad := unenforceable(prof.Name + " does not keep its config option " + quoteShort(id) + " at " + quoteShort(want))
				if e := c.setVerified(ctx, id, want, bad); e != nil {
					return nil, e
				}
			}
			held[id] = want
		}
	}
	for _, ctl := range []struct{ name, value, spec string }{
		{effortControl, p.Effort, prof.EffortOption}, {thinkingControl, p.Thinking, prof.ThinkingOption}} {
		if ctl.value == "" {
			continue
		}
		o := c.seedOption(ctl.name, ctl.spec)
		if o == nil {
			return nil, controlUnavailable("the agent offers no " + ctl.name + " config option")
		}
		if skip[o.ID] {
			continue
		}
		vals := optionValues(o)
		if !contains(vals, ctl.value) {
			return nil, controlUnavailable("the agent does not offer " + ctl.name + " " + c.red.Clean(quoteShort(ctl.value)) +
				" (its option " + quoteShort(o.ID) + " offers " + c.red.Clean(quoteList(vals)) + ")")
		}
		if o.CurrentValue != ctl.value {
			bad := controlUnavailable("the agent did not apply " + ctl.name + " " + c.red.Clean(quoteShort(ctl.value)))
			if e := c.setVerified(ctx, o.ID, ctl.value, bad); e != nil {
				return nil, e
			}
		}
		held[o.ID] = ctl.value
	}
	return held, nil
}

// heldState is the session's held controls (controlState.held) and the
// breach in progress.
type heldState struct {
	values map[string]string // control (config option id or heldMode) → value
	// settling counts the control requests in flight per control: an
	// update the agent sends while it applies one is not a breach.
	settling map[string]int
	// armed: the updates buffered during admission have been replayed
	// (they predate the admission's final answers).
	armed bool
	// breach is the control being set back, "" if none; failed when it
	// could not be: prompts are refused until the session is closed.
	breach string
	failed bool
}

// settle counts a control request on key starting (+1) or ending (-1).
func (h *heldState) settle(key string, d int) {
	if h.settling == nil {
		h.settling = map[string]int{}
	}
	h.settling[key] += d
}

// heldKey is the held-control key a control request touches.
func (s *session) heldKey(kind controlKind, name string) string {
	switch kind {
	case controlMode:
		return heldMode
	case controlOption:
		if s.isOption(name, "mode") {
			return heldMode
		}
		return name
	}
	return ""
}

// heldCurrent is what the agent last reported for a held control.
func (s *session) heldCurrent(key string) (string, bool) {
	if key == heldMode {
		if o := findOption(s.ctl.configOpts, isModeOption); o != nil {
			var v string
			if json.Unmarshal(o.CurrentValue, &v) == nil {
				return v, true
			}
		}
		if s.ctl.modes != nil {
			return s.ctl.modes.CurrentModeID, true
		}
		return "", false
	}
	o := findOption(s.ctl.configOpts, func(o configOption) bool { return o.ID == key })
	if o == nil {
		return "", false
	}
	var v string
	if json.Unmarshal(o.CurrentValue, &v) != nil {
		return string(o.CurrentValue), true
	}
	return v, true
}

// armHeld starts holding the controls once the updates buffered during an
// admission were replayed: the admission's final answers (snapshot) are
// newer than any of them, so the controls go back to those first.
func (s *session) armHeld() {
	snap := s.ctl.final
	if snap.configOpts != nil {
		s.ctl.configOpts = snap.configOpts
	}
	if snap.modes != nil && s.ctl.modes != nil {
		s.ctl.modes.CurrentModeID = snap.modes.CurrentModeID
	}
	s.ctl.held.armed = true
	s.checkHeld()
}

// admittedControls is the controls as the admission's last answers left
// them (armHeld).
type admittedControls struct {
	configOpts []json.RawMessage
	modes      *protocol.Modes
}

// checkHeld compares every held control with what the agent reports; the
// first that moved (and is not being set by a request in flight) is a
// breach.
func (s *session) checkHeld() {
	h := &s.ctl.held
	if !h.armed || h.breach != "" || h.failed || len(h.values) == 0 {
		return
	}
	keys := make([]string, 0, len(h.values))
	for k := range h.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if h.settling[k] > 0 {
			continue
		}
		if got, ok := s.heldCurrent(k); ok && got != h.values[k] {
			s.breach(k, h.values[k], got)
			return
		}
	}
}

// breach ends the turn of a session whose agent moved held control key
// from want to got (POLICY_BREACH), then sets it back and verifies it off
// the actor; the audit (session/policyBreach) says whether that worked.
// Until it has, prompts are refused POLICY_BREACH.
func (s *session) breach(key, want, got string) {
	s.ctl.held.breach = key
	var rid *string
	msg := "the agent moved " + quoteShort(key) + " from " + quoteShort(want) + " to " + s.red.Clean(quoteShort(got)) +
		", which the sidecar holds (docs/agents.md, Drift)"
	s.log.Warn("policy breach", zap.String("control", key))
	if t := s.turns.turn; t != nil {
		r := t.requestID
		rid = &r
		t.failErr = &protocol.TurnError{Code: protocol.ErrPolicyBreach, Message: msg}
		s.cancelTurn(&t.requestID, "policy breach")
	}
	ctl := &controls{conn: s.conn, backendSessionID: s.rec.identity.BackendSessionID, models: cloneModels(s.ctl.models),
		modes: cloneModes(s.ctl.modes), configOpts: s.ctl.configOpts, usedStyle: s.ctl.modelCtl, red: s.red}
	s.ctl.held.settle(key, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.m.cfg.Bounds.HandshakeTimeout)
		defer cancel()
		var e *protocol.Error
		if key == heldMode {
			_, e = ctl.setMode(ctx, want)
		} else {
			e = ctl.setVerified(ctx, key, want, protocol.Domain(protocol.ErrPolicyBreach, "not restored", false))
		}
		s.post(func() {
			s.ctl.held.settle(key, -1)
			restored := e == nil
			if restored {
				s.ctl.configOpts = ctl.configOpts
				if ctl.modes != nil {
					s.ctl.modes = ctl.modes
				}
				s.ctl.held.breach = ""
			} else {
				s.ctl.held.failed = true
			}
			s.act.snapDirty = true
			s.notify(protocol.NotifySessionPolicyBreach, protocol.PolicyBreachNotice{Session: s.id, RequestID: rid,
				Control: key, Held: want, Reported: s.red.Clean(got), Restored: restored})
			s.checkHeld()
		})
	}()
}

// breachRefusal is the error of a prompt while a breach is being set back
// (retryable) or could not be (not: close the session); nil otherwise.
func (s *session) breachRefusal() *protocol.Error {
	h := s.ctl.held
	switch {
	case h.failed:
		return protocol.Domain(protocol.ErrPolicyBreach, "the agent moved a control the sidecar holds and it could not be set back: close the session", false)
	case h.breach != "":
		return protocol.Domain(protocol.ErrPolicyBreach, "the sidecar is setting back "+quoteShort(h.breach)+", which the agent moved", true)
	}
	return nil
}

// checkHeldControl judges a host's control request against the held
// controls before it is sent: a never-mode is refused; an asking option
// moved off its asking value under a policy that needs asking is
// PERMISSION_POLICY_UNENFORCEABLE.
func (s *session) checkHeldControl(kind controlKind, name string, raw json.RawMessage) *protocol.Error {
	b := s.prof.Binding
	if mode, ok := s.modeNamed(kind, name, raw); ok && b.Never(mode) {
		return protocol.Domain(protocol.ErrModeUnavailable, "mode "+quoteShort(mode)+" is never selected: "+b.NeverWhy, false)
	}
	if kind != controlOption || !needsAsking(s.open) {
		return nil
	}
	want, ok := b.AskOptions[name]
	var v string
	if ok && (json.Unmarshal(raw, &v) != nil || v != want) {
		return unenforceable(s.prof.Name + " stops asking when " + quoteShort(name) + " is not " + quoteShort(want))
	}
	return nil
}

// heldAfterControl updates the held controls after a host's control
// request succeeded: the value the host chose is held from now on (a
// mode only while it asks; the request was judged by checkModeChange).
func (s *session) heldAfterControl(key string) {
	h := &s.ctl.held
	if key == "" {
		return
	}
	if _, held := h.values[key]; !held {
		return
	}
	got, ok := s.heldCurrent(key)
	if !ok || (key == heldMode && !s.prof.Binding.Asks(got)) {
		delete(h.values, key)
		return
	}
	h.values[key] = got
}

// promptStartsWithSlash reports whether the prompt's text (a string, or
// its text blocks joined) starts with "/" after leading white space.
func promptStartsWithSlash(prompt json.RawMessage) bool {
	var s string
	if json.Unmarshal(prompt, &s) == nil {
		return strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "/")
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(prompt, &blocks) != nil {
		return false
	}
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == "text" {
			b.WriteString(bl.Text)
		}
	}
	return strings.HasPrefix(strings.TrimLeft(b.String(), " \t\r\n"), "/")
}

// slashRefusal refuses a prompt that starts with "/" for a profile that
// guards them, unless the open allowed them (docs/agents.md, Copilot).
func (s *session) slashRefusal(prompt json.RawMessage) *protocol.Error {
	if !s.prof.SlashGuard || s.open.AllowSlashCommands || !promptStartsWithSlash(prompt) {
		return nil
	}
	return protocol.InvalidParams("prompt", "a prompt that starts with \"/\" runs "+s.prof.Name+
		"'s own commands (which can turn its approvals off); open the session with allowSlashCommands: true to send one")
}
