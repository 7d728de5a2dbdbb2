package protocol

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
)

// Methods of the extension, authentication and agent-session additions
// (docs/protocol.md §23, "Extension methods, authentication, the agent's
// own sessions, capability checks").
const (
	// MethodSessionExtRequest is `session/extRequest`: host → sidecar, a
	// request to the agent's `_…` extension method (ExtRequestParams →
	// ExtRequestResult); sidecar → host, an agent's `_…` request
	// (ExtRequestNotice params, the host's result or error sent back).
	MethodSessionExtRequest = "session/extRequest"
	// NotifySessionExtNotification is `session/extNotification`: host →
	// sidecar, a notification to the agent (ExtNotificationParams);
	// sidecar → host, an agent's `_…` notification (ExtNotice), journaled.
	NotifySessionExtNotification = "session/extNotification"
	// MethodSessionAgentSessions is `session/agentSessions`: the agent's
	// ACP session/list result verbatim (AgentSessionsParams).
	MethodSessionAgentSessions = "session/agentSessions"
)

// Error data.code values of these additions (docs/protocol.md §5, §23).
const (
	// ErrAuthRequired: the agent requires authentication the open did not
	// give (data.authMethods; data.cleanup holds the proof).
	ErrAuthRequired = "AUTH_REQUIRED"
	// ErrAuthFailed: ACP authenticate for the open's authMethod failed, or
	// the method is not one the agent offers to run (data.cleanup).
	ErrAuthFailed = "AUTH_FAILED"
	// ErrCapabilityUnsupported: the request needs an ACP capability the
	// agent did not advertise (data.capability names it as a dot path of
	// agentCapabilities); nothing was sent to the agent.
	ErrCapabilityUnsupported = "CAPABILITY_UNSUPPORTED"
	// ErrAgentError: the agent answered an extension request with an
	// error (data.agentError is the JSON-RPC error object verbatim).
	ErrAgentError = "AGENT_ERROR"
)

// ExtRequestParams are the params of host → sidecar `session/extRequest`
// and `session/extNotification`: Method must begin with "_"; Params (any
// JSON object or array, or absent) reach the agent verbatim.
type ExtRequestParams struct {
	// Session is the id of the session whose agent gets the message.
	Session string `json:"session"`
	// Method is the agent's extension method: "_" and at least one more
	// character; anything else is -32602 and nothing is sent.
	Method string `json:"method"`
	// Params is a JSON object or array sent to the agent verbatim; absent
	// or null sends none.
	Params json.RawMessage `json:"params,omitempty"`
}

// Validate checks ExtRequestParams: -32602 (field method) for a method
// that does not begin with "_", (field params) for params that are not
// an object or an array.
func (p *ExtRequestParams) Validate() *Error {
	if e := checkSession(p.Session); e != nil {
		return e
	}
	if !strings.HasPrefix(p.Method, "_") || len(p.Method) < 2 {
		return InvalidParams("method", "only extension methods (beginning with \"_\") can be sent to an agent this way")
	}
	if len(p.Params) > 0 && string(p.Params) != "null" && p.Params[0] != '{' && p.Params[0] != '[' {
		return InvalidParams("params", "params must be an object or an array")
	}
	if string(p.Params) == "null" {
		p.Params = nil
	}
	return nil
}

// ExtNotificationParams are the params of host → sidecar
// `session/extNotification` (the same shape as ExtRequestParams).
type ExtNotificationParams = ExtRequestParams

// ExtRequestResult is the result of host → sidecar `session/extRequest`:
// the agent's result verbatim.
type ExtRequestResult struct {
	// Result is the agent's JSON-RPC result, verbatim.
	Result json.RawMessage `json:"result"`
}

// Not ExtRequestParams, though the fields match: the other direction, never validated.

// ExtNotice is the params of sidecar → host `session/extNotification`: an
// agent's `_…` notification, Params verbatim.
type ExtNotice struct {
	// Session is the id of the session whose agent sent the notification.
	Session string `json:"session"`
	// Method is the agent's notification method, beginning with "_".
	Method string `json:"method"`
	// Params are the agent's params verbatim; absent when it sent none.
	Params json.RawMessage `json:"params,omitempty"`
}

// Not shared with SessionUpdateNotice: another message, alike field runs only.

// ExtRequestNotice is the params of sidecar → host `session/extRequest`:
// an agent's `_…` request. RequestID is the active turn's (null outside
// a turn); Params are the agent's verbatim.
type ExtRequestNotice struct {
	// Session is the id of the session whose agent sent the request.
	Session string `json:"session"`
	// RequestID is the requestId of the turn running when the agent
	// asked; null outside a turn.
	RequestID *string `json:"requestId"`
	// Method is the agent's request method, beginning with "_".
	Method string `json:"method"`
	// Params are the agent's params verbatim; absent when it sent none.
	Params json.RawMessage `json:"params,omitempty"`
}

// AgentSessionsParams are the params of `session/agentSessions`: Cwd
// (absolute) and Cursor are passed to ACP session/list as given.
type AgentSessionsParams struct {
	// Session is the id of the session whose agent is asked.
	Session string `json:"session"`
	// Cwd is an absolute path passed to ACP session/list as its cwd;
	// empty sends none.
	Cwd string `json:"cwd,omitempty"`
	// Cursor is the previous page's nextCursor, passed on as given;
	// absent asks for the first page.
	Cursor *string `json:"cursor,omitempty"`
}

// Validate checks AgentSessionsParams: cwd must be absolute.
func (p *AgentSessionsParams) Validate() *Error {
	if e := checkSession(p.Session); e != nil {
		return e
	}
	if p.Cwd != "" && !filepath.IsAbs(p.Cwd) {
		return InvalidParams("cwd", "cwd must be absolute")
	}
	return nil
}

// validateExt checks the open's additions of docs/protocol.md §23: _meta
// an object, authMethod and agentSessionId non-empty strings when given,
// additionalDirectories absolute paths.
func (p *OpenParams) validateExt() *Error {
	if e := checkMeta(p.Meta); e != nil {
		return e
	}
	if p.AuthMethod != nil && *p.AuthMethod == "" {
		return InvalidParams("authMethod", "authMethod must be a non-empty method id")
	}
	if p.AgentSessionID != nil && *p.AgentSessionID == "" {
		return InvalidParams("agentSessionId", "agentSessionId must be a non-empty ACP session id")
	}
	for i, d := range p.AdditionalDirectories {
		if !filepath.IsAbs(d) || strings.IndexByte(d, 0) >= 0 {
			return InvalidParams("additionalDirectories."+strconv.Itoa(i), "additionalDirectories entries must be absolute paths")
		}
	}
	return nil
}

// checkMeta: a `_meta` given must be a JSON object.
func checkMeta(m json.RawMessage) *Error {
	if len(m) > 0 && string(m) != "null" && m[0] != '{' {
		return InvalidParams("_meta", "_meta must be an object")
	}
	return nil
}
