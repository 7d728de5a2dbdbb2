package controls

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// heldMode is the held-control key of the session's mode (ACP modes or
// the config option of category "mode"); every other key is a config
// option id.
const heldMode = "mode"

// Held is the session's held controls (docs/protocol.md §24;
// docs/agents.md, "Drift") and the breach in progress. Actor-owned data.
type Held struct {
	Values map[string]string // control (config option id or heldMode) → value
	// Settling counts the control requests in flight per control: an
	// update the agent sends while it applies one is not a breach.
	Settling map[string]int
	// Armed: the updates buffered during admission have been replayed
	// (they predate the admission's final answers).
	Armed bool
	// Breach is the control being set back, "" if none; Failed when it
	// could not be: prompts are refused until the session is closed.
	Breach string
	// Failed: Breach could not be set back; prompts are refused until
	// the session is closed.
	Failed bool
}

// Settle counts a control request on key starting (+1) or ending (-1).
func (h *Held) Settle(key string, d int) {
	if h.Settling == nil {
		h.Settling = map[string]int{}
	}
	h.Settling[key] += d
}

// Admitted is the controls as the admission's last answers left them:
// the agent's config options and modes, adopted again when the controls
// are armed.
type Admitted struct {
	// ConfigOpts are the agent's ACP SessionConfigOptions, cleaned JSON
	// objects; empty when it reported none.
	ConfigOpts []json.RawMessage
	// Modes are the agent's modes (current and available ids); nil when
	// it reported none.
	Modes *protocol.Modes
}

// HeldKey is the held-control key a control request touches (opts: the
// agent's config options); "" for a model.
func HeldKey(opts []json.RawMessage, kind Kind, name string) string {
	switch kind {
	case KindMode:
		return heldMode
	case KindOption:
		if IsOption(opts, name, "mode") {
			return heldMode
		}
		return name
	}
	return ""
}

// Current is what the agent last reported for held control key: from its
// config options opts, or for heldMode from modes when no option is the
// mode. A value that is not a JSON string is its JSON text; ok is false
// when the agent reports nothing for key.
func Current(opts []json.RawMessage, modes *protocol.Modes, key string) (string, bool) {
	if key == heldMode {
		if o := findOption(opts, isModeOption); o != nil {
			var v string
			if json.Unmarshal(o.CurrentValue, &v) == nil {
				return v, true
			}
		}
		if modes != nil {
			return modes.CurrentModeID, true
		}
		return "", false
	}
	o := findOption(opts, func(o ConfigOption) bool { return o.ID == key })
	if o == nil {
		return "", false
	}
	var v string
	if json.Unmarshal(o.CurrentValue, &v) != nil {
		return string(o.CurrentValue), true
	}
	return v, true
}

// Drift compares every held control with what the agent reports
// (current, as Current): the first, by key, that moved and is not being
// set by a request in flight is a breach of key from want to got. ok is
// false when none moved, or the controls are not armed, or a breach is in
// progress or failed.
func (h *Held) Drift(current func(key string) (string, bool)) (key, want, got string, ok bool) {
	if !h.Armed || h.Breach != "" || h.Failed || len(h.Values) == 0 {
		return "", "", "", false
	}
	keys := make([]string, 0, len(h.Values))
	for k := range h.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if h.Settling[k] > 0 {
			continue
		}
		if got, ok := current(k); ok && got != h.Values[k] {
			return k, h.Values[k], got, true
		}
	}
	return "", "", "", false
}

// Refusal is the error of a prompt while a breach is being set back
// (POLICY_BREACH, retryable) or could not be (not: close the session);
// nil otherwise.
func (h *Held) Refusal() *protocol.Error {
	switch {
	case h.Failed:
		return protocol.Domain(protocol.ErrPolicyBreach, "the agent moved a control the sidecar holds and it could not be set back: close the session", false)
	case h.Breach != "":
		return protocol.Domain(protocol.ErrPolicyBreach, "the sidecar is setting back "+protocol.QuoteShort(h.Breach)+", which the agent moved", true)
	}
	return nil
}

// AfterControl updates the held controls after a host's control request
// on key succeeded: the value the host chose (current, as Current) is held
// from now on — a mode only while it asks (b.Asks); the request was
// judged by CheckModeChange.
func (h *Held) AfterControl(key string, current func(key string) (string, bool), b profiles.Binding) {
	if key == "" {
		return
	}
	if _, held := h.Values[key]; !held {
		return
	}
	got, ok := current(key)
	if !ok || (key == heldMode && !b.Asks(got)) {
		delete(h.Values, key)
		return
	}
	h.Values[key] = got
}

// Restore sets held control key back to want after a breach and verifies
// it: the mode as setMode does, an option through session/set_config_option.
// Errors: those of the mode change, or POLICY_BREACH "not restored".
func (c *Setter) Restore(ctx context.Context, key, want string) *protocol.Error {
	var e *protocol.Error
	if key == heldMode {
		_, e = c.setMode(ctx, want)
	} else {
		e = c.setVerified(ctx, key, want, protocol.Domain(protocol.ErrPolicyBreach, "not restored", false))
	}
	return e
}
