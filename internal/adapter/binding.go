package adapter

import (
	"context"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/protocol"
)

// Binding the agent to the host's permission policy (docs/agents.md,
// "How the profile binds it"): an agent that decides tool use alone makes
// permissionMode and permissionPolicy meaningless, so the profile names the
// modes in which the agent asks, and the sidecar runs it in one of them.

// Via values of protocol.PermissionBinding.
const (
	viaAgentDefault = "agent default"
	viaHostMode     = "host mode"
	viaNone         = "none"
)

// needsAsking reports whether the open's policy depends on the agent
// asking: everything except a plain approve-all (no autoDeny or escalate
// rule, no deny/escalate defaultAction) does, since under it some tool use
// must be denied or put to the host.
func needsAsking(p protocol.OpenParams) bool {
	if pp := p.PermissionPolicy; pp != nil {
		if len(pp.AutoDeny) > 0 || len(pp.Escalate) > 0 || (pp.DefaultAction != "" && pp.DefaultAction != "approve") {
			return true
		}
		if pp.DefaultAction == "approve" {
			return false
		}
	}
	return p.PermissionMode != "approve-all"
}

// unenforceable is the PERMISSION_POLICY_UNENFORCEABLE error for why.
func unenforceable(why string) *protocol.Error {
	return protocol.Domain(protocol.ErrPolicyUnenforceable,
		"the permission policy needs the agent to ask before tool use, but "+why+
			"; use permissionMode approve-all, or a mode in which the agent asks (docs/agents.md)", false)
}

// checkHostMode refuses, before anything is launched, an open or a mode
// change that names an autonomous mode while the policy needs the agent
// to ask. It returns nil when mode is allowed.
func checkHostMode(prof profiles.Profile, p protocol.OpenParams, mode string) *protocol.Error {
	if prof.Binding.Autonomous(mode) && needsAsking(p) {
		return unenforceable("in mode " + quoteShort(mode) + " " + prof.Name + " decides tool use alone")
	}
	return nil
}

// bind runs after the session exists (new, load or resume) and after the
// host's own mode was applied: it selects the profile's asking mode when
// the host named none and the agent is not in one already, verifies it,
// and reports how the agent is bound. Errors: MODE_UNAVAILABLE or
// ACPX_SESSION_ENSURE_FAILED from the mode change, and
// PERMISSION_POLICY_UNENFORCEABLE when the policy needs asking and the
// agent offers no asking mode.
func (c *controls) bind(ctx context.Context, prof profiles.Profile, p protocol.OpenParams, hostMode string) (protocol.PermissionBinding, *protocol.Error) {
	b := prof.Binding
	current := ""
	if c.modes != nil {
		current = c.modes.CurrentModeID
	}
	if !b.Bound() {
		return protocol.PermissionBinding{Mode: current, Via: viaNone}, nil
	}
	if len(b.AskModes) == 0 {
		// Bound by launch settings whatever the mode (OpenCode).
		for k := range b.Env {
			return protocol.PermissionBinding{Bound: true, Mode: current, Via: "env " + k}, nil
		}
	}
	if hostMode != "" {
		if b.Autonomous(hostMode) {
			// checkHostMode let it through: the policy is a plain approve-all.
			return protocol.PermissionBinding{Mode: current, Via: viaHostMode, Autonomous: true}, nil
		}
		return protocol.PermissionBinding{Bound: true, Mode: current, Via: viaHostMode}, nil
	}
	if contains(b.AskModes, current) {
		return protocol.PermissionBinding{Bound: true, Mode: current, Via: viaAgentDefault}, nil
	}
	for _, m := range b.AskModes {
		if c.modes == nil || !contains(c.modes.AvailableModeIDs, m) {
			continue
		}
		via, e := c.setMode(ctx, m)
		if e != nil {
			return protocol.PermissionBinding{}, e
		}
		return protocol.PermissionBinding{Bound: true, Mode: m, Via: via}, nil
	}
	if needsAsking(p) {
		return protocol.PermissionBinding{}, unenforceable(prof.Name + " offers none of its asking modes " + quoteList(b.AskModes))
	}
	return protocol.PermissionBinding{Mode: current, Via: viaNone}, nil
}

func quoteList(l []string) string {
	out := ""
	for i, v := range l {
		if i > 0 {
			out += ", "
		}
		out += quoteShort(v)
	}
	return out
}
