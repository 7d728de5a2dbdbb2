package protocol

import "unicode"

// The seed's admissions (docs/protocol.md §24, "Effort, thinking and
// policy breaches"; PROTOCOL §10.5): session/open `effort` and
// `thinking`, Copilot's slash-command guard, the breach of a held control,
// and usage an agent reports on its own extension.

// MaxControlValueBytes bounds session/open `effort` and `thinking`.
const MaxControlValueBytes = 64

// ErrPolicyBreach: the agent moved a control the sidecar holds (its
// asking mode, an asking config option such as Copilot's allow_all, or
// the open's effort or thinking) away from the value admitted: the
// turn's error.code, and the error of prompts refused until the sidecar
// has set it back (retryable then) (docs/protocol.md §24).
const ErrPolicyBreach DataCode = "POLICY_BREACH"

// NotifySessionPolicyBreach is the `session/policyBreach` audit
// notification (PolicyBreachNotice), journaled like every notification.
const NotifySessionPolicyBreach = "session/policyBreach"

// PolicyBreachNotice reports a held control the agent moved: Control is
// "mode" or the config option id, Held the value the sidecar holds,
// Reported what the agent reported; RequestID the turn it ended (null
// between turns); Restored whether the sidecar set it back and verified
// it (false: prompts stay refused POLICY_BREACH; close the session).
type PolicyBreachNotice struct {
	// Session is the sidecar session id whose agent moved the control.
	Session string `json:"session"`
	// RequestID is the turn the breach ended; null for a drift between
	// turns.
	RequestID *string `json:"requestId"`
	// Control is "mode" or the id of the config option that moved.
	Control string `json:"control"`
	// Held is the value the sidecar holds for Control.
	Held string `json:"held"`
	// Reported is the value the agent reported instead.
	Reported string `json:"reported"`
	// Restored: the sidecar set Control back to Held and verified it;
	// false leaves prompts refused POLICY_BREACH until the session closes.
	Restored bool `json:"restored"`
}

// validateSeedControls: effort and thinking, when given, are 1-64 bytes of
// printable characters (values of the agent's own config option).
func (p *OpenParams) validateSeedControls() *Error {
	for _, c := range []struct{ field, v string }{{"effort", p.Effort}, {"thinking", p.Thinking}} {
		if c.v == "" {
			continue
		}
		if len(c.v) > MaxControlValueBytes {
			return InvalidParams(c.field, c.field+" must be at most 64 bytes")
		}
		for _, r := range c.v {
			if !unicode.IsPrint(r) {
				return InvalidParams(c.field, c.field+" must be printable text")
			}
		}
	}
	return nil
}
