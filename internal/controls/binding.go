package controls

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Binding the agent to the host's permission policy (docs/agents.md,
// "How the profile binds it"): an agent that decides tool use alone makes
// permissionMode and permissionPolicy meaningless, so the profile names the
// modes in which the agent asks, and the sidecar runs it in one of them.

// Via values of protocol.PermissionBinding (docs/protocol.md §8,
// `permissionBinding`): the agent already ran in an asking mode; the
// host's mode; the mode the host pinned earlier; not bound. Bind also
// reports the ACP method that selected an asking mode, and "env …" for
// launch settings.
const (
	ViaAgentDefault = "agent default"
	ViaHostMode     = "host mode"
	ViaPinnedMode   = "pinned mode"
	ViaNone         = "none"
)

// NeedsAsking reports whether the open's policy depends on the agent
// asking: everything except a plain approve-all (no autoDeny or escalate
// rule, no deny/escalate defaultAction) does, since under it some tool use
// must be denied or put to the host.
func NeedsAsking(p protocol.OpenParams) bool {
	if pp := p.PermissionPolicy; pp != nil {
		if len(pp.AutoDeny) > 0 || len(pp.Escalate) > 0 || (pp.DefaultAction != "" && pp.DefaultAction != protocol.ActionApprove) {
			return true
		}
		if pp.DefaultAction == protocol.ActionApprove {
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

// CheckHostMode refuses, before anything is launched, an open that names
// a mode known to let the agent decide alone while the policy needs the
// agent to ask. It returns nil when mode is allowed here (a mode the
// profile does not know is judged after the handshake, by Bind).
func CheckHostMode(prof profiles.Profile, p protocol.OpenParams, mode string) *protocol.Error {
	if prof.Binding.Autonomous(mode) && NeedsAsking(p) {
		return unenforceable("in mode " + protocol.QuoteShort(mode) + " " + prof.Name + " decides tool use alone")
	}
	return nil
}

// CheckRetire refuses, before anything is launched, a lifecycle that
// retires the tree (per-turn, or warm with idleRetireMs) for an agent whose
// profile says its session cannot be revived (profiles.Profile.NoRetire;
// docs/protocol.md §24).
func CheckRetire(prof profiles.Profile, p protocol.OpenParams) *protocol.Error {
	l := p.Lifecycle
	if prof.NoRetire == "" || l == nil || (!l.PerTurn() && l.IdleRetireMs == nil) {
		return nil
	}
	what := "lifecycle per-turn retires the tree after every turn"
	if !l.PerTurn() {
		what = "lifecycle warm with idleRetireMs retires an idle tree"
	}
	e := protocol.Domain(protocol.ErrCapabilityUnsupported, what+", but "+prof.NoRetire, false)
	e.Data.Capability = "loadSession"
	return e
}

// CheckModeChange judges a session/setMode (or setConfigOption of the mode)
// to mode on a live session offering modes: under a policy that needs
// asking, a mode outside the profile's asking modes is refused
// (MODE_UNAVAILABLE when the agent does not even offer it).
func CheckModeChange(prof profiles.Profile, p protocol.OpenParams, mode string, modes *protocol.Modes) *protocol.Error {
	b := prof.Binding
	if !NeedsAsking(p) || len(b.AskModes) == 0 || b.Asks(mode) {
		return nil
	}
	if modes != nil && !slices.Contains(modes.AvailableModeIDs, mode) {
		return protocol.Domain(protocol.ErrModeUnavailable, "the agent does not offer mode "+protocol.QuoteShort(mode), false)
	}
	return unenforceable("in mode " + protocol.QuoteShort(mode) + " " + prof.Name + " decides tool use alone")
}

// CheckWorkspace refuses, before anything is launched, an open whose cwd
// or a directory above it holds one of the profile's WorkspaceGrants while
// the policy needs the agent to ask: the agent would read permission
// grants from it that no setting turns off (codex-acp 2.x and .codex/).
func CheckWorkspace(prof profiles.Profile, p protocol.OpenParams) *protocol.Error {
	if len(prof.Binding.WorkspaceGrants) == 0 || !NeedsAsking(p) {
		return nil
	}
	for dir := filepath.Clean(p.Cwd); ; dir = filepath.Dir(dir) {
		for _, name := range prof.Binding.WorkspaceGrants {
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				return unenforceable(filepath.Join(dir, name) + " can grant " + prof.Name +
					" permissions no setting turns off (move it away, or use approve-all)")
			}
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

// IsolateMeta is the profile's IsolateMeta when the policy needs asking,
// merged over meta (a copy; meta is not changed). A profile value that is
// not a JSON object is ignored (profiles are data under test).
func IsolateMeta(prof profiles.Profile, p protocol.OpenParams, meta map[string]any) map[string]any {
	if prof.Binding.IsolateMeta == "" || !NeedsAsking(p) {
		return meta
	}
	var add map[string]any
	if json.Unmarshal([]byte(prof.Binding.IsolateMeta), &add) != nil {
		return meta
	}
	out := map[string]any{}
	for k, v := range meta {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

// Bind runs after the session exists (new, load or resume) and after the
// host's own mode was applied: it selects the profile's asking mode when
// the host named none and the agent is not in one already, verifies it,
// and reports how the agent is bound. Errors: MODE_UNAVAILABLE or
// ACPX_SESSION_ENSURE_FAILED from the mode change, and
// PERMISSION_POLICY_UNENFORCEABLE when the policy needs asking and the
// agent offers no asking mode.
//
// hostMode is the mode the host asked for (this open's, or pinned in the
// record when pinned is true).
func (c *Setter) Bind(ctx context.Context, prof profiles.Profile, p protocol.OpenParams, hostMode string, pinned bool) (protocol.PermissionBinding, *protocol.Error) {
	b := prof.Binding
	current := ""
	if c.Modes != nil {
		current = c.Modes.CurrentModeID
	}
	if !b.Bound() {
		return protocol.PermissionBinding{Mode: current, Via: ViaNone}, nil
	}
	if len(b.AskModes) == 0 {
		// Bound by launch settings whatever the mode (OpenCode).
		keys := make([]string, 0, len(b.Env))
		for k := range b.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return protocol.PermissionBinding{Bound: true, Mode: current, Via: "env " + strings.Join(keys, " ")}, nil
	}
	if hostMode != "" {
		via := ViaHostMode
		if pinned {
			via = ViaPinnedMode
		}
		if !b.Asks(hostMode) {
			if NeedsAsking(p) {
				return protocol.PermissionBinding{}, unenforceable("in mode " + protocol.QuoteShort(hostMode) + " " + prof.Name + " decides tool use alone")
			}
			return protocol.PermissionBinding{Mode: current, Via: via, Autonomous: true}, nil
		}
		return protocol.PermissionBinding{Bound: true, Mode: current, Via: via}, nil
	}
	if slices.Contains(b.AskModes, current) {
		return protocol.PermissionBinding{Bound: true, Mode: current, Via: ViaAgentDefault}, nil
	}
	for _, m := range b.AskModes {
		if c.Modes == nil || !slices.Contains(c.Modes.AvailableModeIDs, m) {
			continue
		}
		via, e := c.setMode(ctx, m)
		if e != nil {
			return protocol.PermissionBinding{}, e
		}
		return protocol.PermissionBinding{Bound: true, Mode: m, Via: via}, nil
	}
	if NeedsAsking(p) {
		return protocol.PermissionBinding{}, unenforceable(prof.Name + " offers none of its asking modes " + quoteList(b.AskModes))
	}
	return protocol.PermissionBinding{Mode: current, Via: ViaNone}, nil
}

// quoteList is l's values quoted (protocol.QuoteShort), comma-separated.
func quoteList(l []string) string {
	out := ""
	for i, v := range l {
		if i > 0 {
			out += ", "
		}
		out += protocol.QuoteShort(v)
	}
	return out
}
