package controls

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"

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

// effortControl and thinkingControl are the open's members.
const (
	effortControl   = "effort"
	thinkingControl = "thinking"
)

// CheckSeedOpen refuses, before anything is launched: a policy that needs
// asking for an agent that cannot ask (pi); a mode the profile never
// selects (Copilot's autopilot); effort or thinking for an agent whose
// profile says it has no such option (CONTROL_UNAVAILABLE).
func CheckSeedOpen(prof profiles.Profile, p protocol.OpenParams) *protocol.Error {
	b := prof.Binding
	if b.CannotAsk != "" && NeedsAsking(p) {
		return unenforceable(b.CannotAsk)
	}
	if p.Mode != "" && b.Never(p.Mode) {
		return protocol.Domain(protocol.ErrModeUnavailable, "mode "+protocol.QuoteShort(p.Mode)+" is never selected: "+b.NeverWhy, false)
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
func (c *Setter) seedOption(control, spec string) *selectOption {
	if spec == "" {
		spec = control
		if control == thinkingControl {
			spec = "thought_level"
		}
	}
	var byCat *selectOption
	for _, raw := range c.ConfigOpts {
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

// ApplySeedControls runs in the handshake after the binding, on every
// new, load and resume (and revive): the binding's asking options set
// and verified when the policy needs asking; the open's effort and
// thinking set and verified (a value the agent does not offer:
// CONTROL_UNAVAILABLE). It returns the controls to hold: config option id
// (or heldMode) → value. skip names options the host set since the open
// (a revive re-applies those instead).
func (c *Setter) ApplySeedControls(ctx context.Context, prof profiles.Profile, p protocol.OpenParams, binding protocol.PermissionBinding, skip map[string]bool) (map[string]string, *protocol.Error) {
	held := map[string]string{}
	if NeedsAsking(p) && binding.Bound && len(prof.Binding.AskModes) > 0 && binding.Mode != "" {
		held[heldMode] = binding.Mode
	}
	if NeedsAsking(p) {
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
				bad := unenforceable(prof.Name + " does not keep its config option " + protocol.QuoteShort(id) + " at " + protocol.QuoteShort(want))
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
		if !slices.Contains(vals, ctl.value) {
			return nil, controlUnavailable("the agent does not offer " + ctl.name + " " + c.clean(protocol.QuoteShort(ctl.value)) +
				" (its option " + protocol.QuoteShort(o.ID) + " offers " + c.clean(quoteList(vals)) + ")")
		}
		if o.CurrentValue != ctl.value {
			bad := controlUnavailable("the agent did not apply " + ctl.name + " " + c.clean(protocol.QuoteShort(ctl.value)))
			if e := c.setVerified(ctx, o.ID, ctl.value, bad); e != nil {
				return nil, e
			}
		}
		held[o.ID] = ctl.value
	}
	return held, nil
}

// CheckHeldControl judges a host's control request against the held
// controls before it is sent: a never-mode is refused; an asking option
// moved off its asking value under a policy that needs asking is
// PERMISSION_POLICY_UNENFORCEABLE. mode, isMode are what ModeNamed says
// of the request.
func CheckHeldControl(prof profiles.Profile, open protocol.OpenParams, kind Kind, name string, raw json.RawMessage, mode string, isMode bool) *protocol.Error {
	b := prof.Binding
	if isMode && b.Never(mode) {
		return protocol.Domain(protocol.ErrModeUnavailable, "mode "+protocol.QuoteShort(mode)+" is never selected: "+b.NeverWhy, false)
	}
	if kind != KindOption || !NeedsAsking(open) {
		return nil
	}
	want, ok := b.AskOptions[name]
	var v string
	if ok && (json.Unmarshal(raw, &v) != nil || v != want) {
		return unenforceable(prof.Name + " stops asking when " + protocol.QuoteShort(name) + " is not " + protocol.QuoteShort(want))
	}
	return nil
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

// SlashRefusal refuses (INVALID_PARAMS, field "prompt") a prompt that
// starts with "/" for a profile that guards them, unless the open allowed
// them (docs/agents.md, Copilot); nil otherwise.
func SlashRefusal(prof profiles.Profile, open protocol.OpenParams, prompt json.RawMessage) *protocol.Error {
	if !prof.SlashGuard || open.AllowSlashCommands || !promptStartsWithSlash(prompt) {
		return nil
	}
	return protocol.InvalidParams("prompt", "a prompt that starts with \"/\" runs "+prof.Name+
		"'s own commands (which can turn its approvals off); open the session with allowSlashCommands: true to send one")
}
