package acpclient

import "encoding/json"

// InitializeResult is ACP initialize's result as the sidecar reads it
// (testdata/acp/schema.v1.json InitializeResponse), kept raw where it is
// reported to the host verbatim (agentCapabilities, authMethods).
type InitializeResult struct {
	// ProtocolVersion is the ACP version the agent speaks.
	ProtocolVersion int `json:"protocolVersion"`
	// AgentCapabilities is the agent's agentCapabilities object verbatim
	// (Caps decodes what the sidecar acts on).
	AgentCapabilities json.RawMessage `json:"agentCapabilities"`
	// AgentInfo is the agent's name, title and version; nil when absent.
	AgentInfo *struct {
		Name    string `json:"name"`
		Title   string `json:"title"`
		Version string `json:"version"`
	} `json:"agentInfo"`
	// AuthMethods are ACP AuthMethod[] verbatim (docs/protocol.md §23).
	AuthMethods []json.RawMessage `json:"authMethods"`
}

// Caps decodes the AgentCaps of r's agentCapabilities. An absent or
// unreadable object reads as an agent that advertises nothing (the
// sidecar then sends nothing that needs a capability).
func (r *InitializeResult) Caps() AgentCaps {
	var caps AgentCaps
	if len(r.AgentCapabilities) > 0 {
		_ = json.Unmarshal(r.AgentCapabilities, &caps)
	}
	return caps
}

// SessionState is the common part of ACP session/new, session/load and
// session/resume results: the agent's session id and its model, mode and
// config-option state (configOptions kept raw: they are reported to the
// host verbatim).
type SessionState struct {
	// SessionID is the agent's session id ("" in load's result, which
	// names none).
	SessionID string `json:"sessionId"`
	// Models is ACP's unstable `models` member; nil when absent.
	Models *struct {
		CurrentModelID  string       `json:"currentModelId"`
		AvailableModels []ModelEntry `json:"availableModels"`
	} `json:"models"`
	// Modes is ACP `modes`; nil when absent.
	Modes *struct {
		CurrentModeID  string      `json:"currentModeId"`
		AvailableModes []ModeEntry `json:"availableModes"`
	} `json:"modes"`
	// ConfigOptions are ACP SessionConfigOption[] verbatim.
	ConfigOptions []json.RawMessage `json:"configOptions"`
	// Meta is the result's _meta.
	Meta map[string]any `json:"_meta"`
}

// ModelEntry is one entry of ACP availableModels.
type ModelEntry struct {
	// ModelID is the model's id (what session/set_model takes).
	ModelID string `json:"modelId"`
	// Name is its display name.
	Name string `json:"name"`
}

// ModeEntry is one entry of ACP availableModes.
type ModeEntry struct {
	// ID is the mode's id (what session/set_mode takes).
	ID string `json:"id"`
}
