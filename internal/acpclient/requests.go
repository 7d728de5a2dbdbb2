package acpclient

import (
	"encoding/json"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The requests the sidecar sends an agent during the handshake and a turn
// (docs/protocol.md §23, "Authentication" and "Extension methods and
// _meta"): initialize's params as the sidecar advertises them, the
// session-creating request's params with the host's mcpServers and _meta
// as given, the agent's authMethods as read, and session/prompt's params.

// CodeAuthRequired is ACP's ErrorCode auth_required
// (testdata/acp/schema.v1.json ErrorCode): the JSON-RPC error code an
// agent answers session/new|load|resume with when it needs
// authentication first.
const CodeAuthRequired = -32000

// InitializeParams are ACP initialize's params, JSON-encoded: protocol
// version acp.ProtocolVersionNumber, clientInfo {protocol.ServerName,
// version}, and caps (the SDK's client capabilities; the sidecar's have
// no fs, no terminal: docs/protocol.md §14) plus
// session.configOptions.boolean, which the SDK's type does not carry (the
// sidecar answers boolean config options). The error is encoding/json's.
func InitializeParams(caps acp.ClientCapabilities, version string) (json.RawMessage, error) {
	raw, err := json.Marshal(caps)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	m["session"] = json.RawMessage(`{"configOptions":{"boolean":{}}}`)
	return json.Marshal(map[string]any{
		"protocolVersion":    acp.ProtocolVersionNumber,
		"clientCapabilities": m,
		"clientInfo":         acp.Implementation{Name: protocol.ServerName, Version: version},
	})
}

// SessionParams are the params of ACP session/new, session/load and
// session/resume as the sidecar sends them: McpServers are the host's
// entries verbatim (never decoded into the SDK's types, which would drop
// or reorder what they do not know); Meta is the host's _meta under the
// sidecar's own keys.
type SessionParams struct {
	// SessionID is ACP sessionId, the session to load or resume; "" (and
	// omitted) for session/new.
	SessionID string `json:"sessionId,omitempty"`
	// Cwd is ACP cwd, the open's working directory (ACP: an absolute
	// path).
	Cwd string `json:"cwd"`
	// AdditionalDirectories is ACP additionalDirectories, absolute paths;
	// omitted when empty.
	AdditionalDirectories []string `json:"additionalDirectories,omitempty"`
	// McpServers is ACP mcpServers, the host's entries verbatim; never
	// nil ([] when none), since ACP requires the member.
	McpServers []json.RawMessage `json:"mcpServers"`
	// Meta is ACP _meta: the host's keys with the sidecar's set over
	// them (WithMeta); omitted when nil.
	Meta map[string]any `json:"_meta,omitempty"`
}

// NewSessionParams builds SessionParams from the open's cwd,
// additionalDirectories and mcpServers (none: []) for id ("" for
// session/new); Meta is left for the caller.
func NewSessionParams(p protocol.OpenParams, id string) SessionParams {
	mcp := p.McpServers
	if mcp == nil {
		mcp = []json.RawMessage{}
	}
	return SessionParams{SessionID: id, Cwd: p.Cwd, AdditionalDirectories: p.AdditionalDirectories, McpServers: mcp}
}

// HostMeta is the host's _meta as a map (nil when none); each value stays
// raw, so what the host wrote under a key reaches the agent as written.
func HostMeta(raw json.RawMessage) map[string]any {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil || len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// WithMeta returns the host's meta with the sidecar's own keys set over
// it (the sidecar's win: docs/protocol.md §23).
func WithMeta(host map[string]any, own map[string]any) map[string]any {
	if len(host) == 0 {
		return own
	}
	out := make(map[string]any, len(host)+len(own))
	for k, v := range host {
		out[k] = v
	}
	for k, v := range own {
		out[k] = v
	}
	return out
}

// AuthInfo is what the sidecar reads of one ACP AuthMethod (an entry of
// initialize's authMethods): its id and its type ("terminal" is run by
// the user, never by the sidecar: docs/protocol.md §23).
type AuthInfo struct {
	// ID is the AuthMethod's id, never "" (AuthMethodsOf drops those).
	ID string `json:"id"`
	// Type is the AuthMethod's type (e.g. "terminal"); "" when absent.
	Type string `json:"type"`
}

// AuthMethodsOf decodes the ids and types of the agent's authMethods, in
// order; an entry that is not an object with a non-empty string id is
// left out.
func AuthMethodsOf(raws []json.RawMessage) []AuthInfo {
	out := make([]AuthInfo, 0, len(raws))
	for _, r := range raws {
		var a AuthInfo
		if json.Unmarshal(r, &a) == nil && a.ID != "" {
			out = append(out, a)
		}
	}
	return out
}

// PromptRequest is ACP session/prompt's params as sent: the blocks (as
// PromptBlocks returns them) and the host's _meta verbatim.
type PromptRequest struct {
	// SessionID is ACP sessionId, the agent's session the prompt is for.
	SessionID string `json:"sessionId"`
	// Prompt is ACP prompt, a JSON array of ContentBlocks (PromptBlocks).
	Prompt json.RawMessage `json:"prompt"`
	// Meta is ACP _meta, the host's verbatim; omitted when empty.
	Meta json.RawMessage `json:"_meta,omitempty"`
}
