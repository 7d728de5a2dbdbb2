package acpclient

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/strictjson"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The checks of the agent's capabilities before anything that needs them
// is sent (docs/protocol.md §23, "Capability checks before sending").

// AgentCaps are the parts of ACP agentCapabilities (initialize's result,
// testdata/acp/schema.v1.json AgentCapabilities) the sidecar acts on,
// decoded with encoding/json. A pointer member is nil when the agent
// does not advertise it and set (to whatever value) when it does.
type AgentCaps struct {
	// LoadSession is agentCapabilities.loadSession: session/load is
	// supported (false when absent).
	LoadSession bool `json:"loadSession"`
	// SessionCapabilities is agentCapabilities.sessionCapabilities: each
	// member (close, resume, list, additionalDirectories) is non-nil when
	// the agent advertises it, whatever its value.
	SessionCapabilities struct {
		Close                 *json.RawMessage `json:"close"`
		Resume                *json.RawMessage `json:"resume"`
		List                  *json.RawMessage `json:"list"`
		AdditionalDirectories *json.RawMessage `json:"additionalDirectories"`
	} `json:"sessionCapabilities"`
	// PromptCapabilities and McpCapabilities: what is checked before
	// sending (docs/protocol.md §23, CheckSessionCaps and PromptBlocks).
	PromptCapabilities struct {
		Image           bool `json:"image"`
		Audio           bool `json:"audio"`
		EmbeddedContext bool `json:"embeddedContext"`
	} `json:"promptCapabilities"`
	// McpCapabilities is agentCapabilities.mcpCapabilities: the MCP
	// transports (http, sse) the agent accepts besides stdio.
	McpCapabilities struct {
		HTTP bool `json:"http"`
		SSE  bool `json:"sse"`
	} `json:"mcpCapabilities"`
}

// CapabilityError is the CAPABILITY_UNSUPPORTED error (docs/protocol.md
// §23) for capability, a dot path of agentCapabilities (data.capability),
// that what (the open's or prompt's member needing it) needs.
func CapabilityError(capability, what string) *protocol.Error {
	e := protocol.Domain(protocol.ErrCapabilityUnsupported, what+" needs the agent capability "+capability+", which it does not advertise", false)
	e.Data.Capability = capability
	return e
}

// CheckSessionCaps refuses, before session/new|load|resume is sent, the
// open's mcpServers of a transport the agent lacks (mcpCapabilities.http,
// .sse) and additionalDirectories an agent without
// sessionCapabilities.additionalDirectories (docs/protocol.md §23): nil
// when p may be sent, else CapabilityError's error, or -32602 naming
// mcpServers.N (.type) for an entry whose type cannot be read or is no
// ACP MCP transport.
func CheckSessionCaps(p protocol.OpenParams, caps AgentCaps) *protocol.Error {
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
			return protocol.InvalidParams(at+".type", at+".type "+protocol.QuoteShort(typ)+" is not an ACP MCP transport (stdio, http, sse)")
		case typ == "http" && !caps.McpCapabilities.HTTP:
			return CapabilityError("mcpCapabilities.http", "mcpServers."+strconv.Itoa(i)+" (type http)")
		case typ == "sse" && !caps.McpCapabilities.SSE:
			return CapabilityError("mcpCapabilities.sse", "mcpServers."+strconv.Itoa(i)+" (type sse)")
		}
	}
	if len(p.AdditionalDirectories) > 0 && caps.SessionCapabilities.AdditionalDirectories == nil {
		return CapabilityError("sessionCapabilities.additionalDirectories", "additionalDirectories")
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
			return "", false, "unknown member " + protocol.QuoteShort(m.Key) + "; member names are case-sensitive"
		}
	}
	return typ, present, ""
}

// PromptBlocks returns the prompt as the ACP ContentBlock[] to send, the
// host's blocks verbatim (a string prompt becomes one text block), or
// CAPABILITY_UNSUPPORTED for a block the agent's promptCapabilities do not
// allow; -32602 for a prompt that is not a ContentBlock[].
func PromptBlocks(prompt json.RawMessage, caps AgentCaps) (json.RawMessage, *protocol.Error) {
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
			return nil, protocol.InvalidParams(at+".type", at+".type "+protocol.QuoteShort(typ)+" is not an ACP ContentBlock type (text, image, audio, resource, resource_link)")
		}
		if c, ok := promptBlockCaps[typ]; ok && !have[c] {
			return nil, CapabilityError(c, at+" (type "+typ+")")
		}
	}
	return jsonl.CleanRaw(prompt), nil
}
