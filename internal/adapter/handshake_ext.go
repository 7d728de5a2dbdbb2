package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	acp "github.com/coder/acp-go-sdk"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/strictjson"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The handshake's part of docs/protocol.md §23 (PROTOCOL.md §9
// "Authentication", "The agent's own sessions", "Capability checks before
// sending"): what the sidecar advertises, the session-creating request's
// params with the host's mcpServers and _meta as given, the open's
// authMethod, and the checks of the agent's capabilities before anything
// that needs them is sent.

// acpAuthRequired is ACP's ErrorCode auth_required (schema/v1 ErrorCode):
// what an agent answers session/new|load|resume when it needs
// authentication first.
const acpAuthRequired = -32000

// initializeParams are ACP initialize's params: the SDK's client
// capabilities (no fs, no terminal: docs/protocol.md §14) plus
// session.configOptions.boolean, which the SDK's type does not carry (the
// sidecar answers boolean config options: controls.setOption).
func initializeParams(caps acp.ClientCapabilities, version string) (json.RawMessage, error) {
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

// sessionParams are the params of ACP session/new, session/load and
// session/resume as the sidecar sends them: McpServers are the host's
// entries verbatim (never decoded into the SDK's types, which would drop
// or reorder what they do not know); Meta is the host's _meta under the
// sidecar's own keys.
type sessionParams struct {
	SessionID             string            `json:"sessionId,omitempty"`
	Cwd                   string            `json:"cwd"`
	AdditionalDirectories []string          `json:"additionalDirectories,omitempty"`
	McpServers            []json.RawMessage `json:"mcpServers"`
	Meta                  map[string]any    `json:"_meta,omitempty"`
}

// newSessionParams builds sessionParams for id ("" for session/new).
func newSessionParams(p protocol.OpenParams, id string) sessionParams {
	mcp := p.McpServers
	if mcp == nil {
		mcp = []json.RawMessage{}
	}
	return sessionParams{SessionID: id, Cwd: p.Cwd, AdditionalDirectories: p.AdditionalDirectories, McpServers: mcp}
}

// hostMeta is the host's _meta as a map (nil when none); each value stays
// raw, so what the host wrote under a key reaches the agent as written.
func hostMeta(raw json.RawMessage) map[string]any {
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

// withMeta returns the host's meta with the sidecar's own keys set over
// it (the sidecar's win: docs/protocol.md §23).
func withMeta(host map[string]any, own map[string]any) map[string]any {
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

// authInfo is what the sidecar reads of one ACP AuthMethod.
type authInfo struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// authMethodsOf decodes the ids and types of the agent's authMethods.
func authMethodsOf(raws []json.RawMessage) []authInfo {
	out := make([]authInfo, 0, len(raws))
	for _, r := range raws {
		var a authInfo
		if json.Unmarshal(r, &a) == nil && a.ID != "" {
			out = append(out, a)
		}
	}
	return out
}

// hostAuthenticate runs ACP authenticate for the open's authMethod.
// Errors are AUTH_FAILED: a method the agent does not offer, a
// terminal-type method (the user runs those, never the sidecar), or the
// agent's refusal.
func (s *session) hostAuthenticate(ctx context.Context, conn *acpConn, id string, offered []authInfo) *protocol.Error {
	found := false
	for _, a := range offered {
		if a.ID == id {
			if a.Type == "terminal" {
				return protocol.Domain(protocol.ErrAuthFailed, "auth method "+quoteShort(id)+" is terminal-type: the user runs it, the sidecar never does", false)
			}
			found = true
		}
	}
	if !found {
		return protocol.Domain(protocol.ErrAuthFailed, "the agent offers no auth method "+s.red.Clean(quoteShort(id)), false)
	}
	if err := conn.call(ctx, acp.AgentMethodAuthenticate, acp.AuthenticateRequest{MethodId: id}, nil); err != nil {
		e := s.acpError("authenticate", err)
		e.Data.Code = protocol.ErrAuthFailed
		return e
	}
	return nil
}

// sessionError is the open's error for a failed session/new|load|resume:
// AUTH_REQUIRED (data.authMethods) when the agent requires authentication
// the open did not give, AUTH_FAILED when it still does after the open's
// authMethod, else acpError.
func (s *session) sessionError(step string, err error, p protocol.OpenParams, authMethods []json.RawMessage) *protocol.Error {
	var je *jsonrpc2.Error
	if !errors.As(err, &je) || je.Code != acpAuthRequired {
		return s.acpError(step, err)
	}
	e := s.acpError(step, err)
	if p.AuthMethod != nil {
		e.Data.Code = protocol.ErrAuthFailed
		e.Message += " (after authenticate " + s.red.Clean(quoteShort(*p.AuthMethod)) + ")"
		return e
	}
	e.Data.Code = protocol.ErrAuthRequired
	e.Message += " (the agent requires authentication: open with authMethod, one of data.authMethods)"
	e.Data.AuthMethods = authMethods
	if e.Data.AuthMethods == nil {
		e.Data.AuthMethods = []json.RawMessage{}
	}
	return e
}

// capabilityError is CAPABILITY_UNSUPPORTED for capability (a dot path of
// agentCapabilities).
func capabilityError(capability, what string) *protocol.Error {
	e := protocol.Domain(protocol.ErrCapabilityUnsupported, what+" needs the agent capability "+capability+", which it does not advertise", false)
	e.Data.Capability = capability
	return e
}

// checkSessionCaps refuses, before session/new|load|resume is sent, the
// open's mcpServers of a transport the agent lacks (mcpCapabilities.http,
// .sse) and additionalDirectories an agent without
// sessionCapabilities.additionalDirectories.
func checkSessionCaps(p protocol.OpenParams, caps agentCaps) *protocol.Error {
	for i, raw := range p.McpServers {
		at := "mcpServers." + strconv.Itoa(i)
		typ, present, why := memberType(raw)
		switch {
		case why != "":
			return protocol.InvalidParams(at, at+": "+why)
		case !present:
			typ = "stdio" // ACP McpServerStdio has no type
		}
		switch {
		case typ != "stdio" && typ != "http" && typ != "sse":
			// Nothing the sidecar cannot check is sent (docs/protocol.md §23).
			return protocol.InvalidParams(at+".type", at+".type "+quoteShort(typ)+" is not an ACP MCP transport (stdio, http, sse)")
		case typ == "http" && !caps.McpCapabilities.HTTP:
			return capabilityError("mcpCapabilities.http", "mcpServers."+strconv.Itoa(i)+" (type http)")
		case typ == "sse" && !caps.McpCapabilities.SSE:
			return capabilityError("mcpCapabilities.sse", "mcpServers."+strconv.Itoa(i)+" (type sse)")
		}
	}
	if len(p.AdditionalDirectories) > 0 && caps.SessionCapabilities.AdditionalDirectories == nil {
		return capabilityError("sessionCapabilities.additionalDirectories", "additionalDirectories")
	}
	return nil
}

// promptBlockCaps maps a ContentBlock type to the promptCapabilities
// member it needs (text and resource_link are baseline).
var promptBlockCaps = map[string]string{"image": "promptCapabilities.image", "audio": "promptCapabilities.audio",
	"resource": "promptCapabilities.embeddedContext"}

// knownBlockTypes are the ACP ContentBlock types (schema v1).
var knownBlockTypes = map[string]bool{"text": true, "image": true, "audio": true, "resource": true, "resource_link": true}

// memberType reads the "type" member of raw, a JSON object that is sent
// on verbatim, the way every reader will: exactly one member named
// "type" (none: present false), a string. why is set (and typ empty) for
// an object that names a member twice, a case variant of "type" ("Type":
// encoding/json would have read it as the type while the agent reads
// "type"; found by a fresh-user trial), a non-string type, or a value that
// is not an object.
func memberType(raw json.RawMessage) (typ string, present bool, why string) {
	ms, err := strictjson.ObjectMembers(raw)
	switch {
	case errors.Is(err, strictjson.ErrDuplicateKey):
		return "", false, "a member name occurs twice"
	case err != nil:
		return "", false, "not a JSON object"
	}
	for _, m := range ms {
		switch {
		case m.Key == "type":
			if json.Unmarshal(m.Val, &typ) != nil {
				return "", false, "type must be a string"
			}
			present = true
		case strings.EqualFold(m.Key, "type"):
			return "", false, "unknown member " + quoteShort(m.Key) + "; member names are case-sensitive"
		}
	}
	return typ, present, ""
}

// promptBlocks returns the prompt as the ACP ContentBlock[] to send, the
// host's blocks verbatim (a string prompt becomes one text block), or
// CAPABILITY_UNSUPPORTED for a block the agent's promptCapabilities do not
// allow; -32602 for a prompt that is not a ContentBlock[].
func promptBlocks(prompt json.RawMessage, caps agentCaps) (json.RawMessage, *protocol.Error) {
	if len(prompt) > 0 && prompt[0] == '"' {
		var text string
		_ = json.Unmarshal(prompt, &text)
		b, _ := json.Marshal([]acp.ContentBlock{acp.TextBlock(text)})
		return b, nil
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(prompt, &blocks); err != nil {
		return nil, protocol.InvalidParams("prompt", "prompt is not an ACP ContentBlock[]")
	}
	have := map[string]bool{"promptCapabilities.image": caps.PromptCapabilities.Image,
		"promptCapabilities.audio": caps.PromptCapabilities.Audio, "promptCapabilities.embeddedContext": caps.PromptCapabilities.EmbeddedContext}
	for i, raw := range blocks {
		at := "prompt." + strconv.Itoa(i)
		typ, _, why := memberType(raw)
		if why != "" {
			return nil, protocol.InvalidParams(at, at+": "+why)
		}
		if !knownBlockTypes[typ] {
			// The bytes go to the agent as written: a type the sidecar does
			// not know is one it could not check (docs/protocol.md §23).
			return nil, protocol.InvalidParams(at+".type", at+".type "+quoteShort(typ)+" is not an ACP ContentBlock type (text, image, audio, resource, resource_link)")
		}
		if c, ok := promptBlockCaps[typ]; ok && !have[c] {
			return nil, capabilityError(c, at+" (type "+typ+")")
		}
	}
	return jsonl.CleanRaw(prompt), nil
}

// promptRequest is ACP session/prompt's params as sent: the blocks and
// the host's _meta verbatim.
type promptRequest struct {
	SessionID string          `json:"sessionId"`
	Prompt    json.RawMessage `json:"prompt"`
	Meta      json.RawMessage `json:"_meta,omitempty"`
}
