package protocol

import (
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on host-chosen identifiers (docs/protocol.md §8 session/open,
// session/prompt), in bytes.
const (
	MaxSessionKeyBytes    = 512
	MaxRequestIDBytes     = 256
	MaxHandshakeTimeoutMs = 600000
	DefaultPermissionMode = "approve-reads"
	DefaultNonInteractive = "deny"
	defaultHandshakeMinMs = 1
	maxPromptTimeoutMs    = 24 * 60 * 60 * 1000
)

var (
	permissionModes = map[string]bool{"approve-all": true, "approve-reads": true, "deny-all": true}
	nonInteractive  = map[string]bool{"deny": true, "fail": true}
	policyActions   = map[PermissionAction]bool{ActionApprove: true, ActionDeny: true, ActionEscalate: true}
	// ToolKinds are the ACP ToolKind values.
	ToolKinds = map[string]bool{"read": true, "edit": true, "delete": true, "move": true, "search": true,
		"execute": true, "think": true, "fetch": true, "switch_mode": true, "other": true}
)

func checkID(field, v string, max int) *Error {
	switch {
	case v == "":
		return InvalidParams(field, field+" is required")
	case len(v) > max:
		return InvalidParams(field, field+" is longer than "+strconv.Itoa(max)+" bytes")
	case strings.IndexByte(v, 0) >= 0:
		return InvalidParams(field, field+" must not contain NUL")
	case !utf8.ValidString(v):
		return InvalidParams(field, field+" must be valid UTF-8")
	case strings.ContainsRune(v, utf8.RuneError):
		// A lone surrogate escape (\ud800) decodes to U+FFFD: two keys
		// that differ only there would name one record.
		return InvalidParams(field, field+" must not contain U+FFFD or a lone surrogate escape")
	}
	return nil
}

func checkSession(v string) *Error {
	if v == "" {
		return InvalidParams("session", "session is required")
	}
	return nil
}

// Validate checks InitializeParams; an unsupported protocolVersion gets
// -32602 with data.supported (docs/protocol.md §7 initialize).
func (p *InitializeParams) Validate() *Error {
	if p.ProtocolVersion == nil {
		return InvalidParams("protocolVersion", "protocolVersion is required")
	}
	if *p.ProtocolVersion != Version {
		e := InvalidParams("protocolVersion", "unsupported protocolVersion")
		e.Data.Supported = []int{Version}
		return e
	}
	return nil
}

// Validate checks OpenParams and fills defaults (permissionMode,
// nonInteractivePermissions). It returns -32602 naming the first bad
// field. The error text never includes env values.
func (p *OpenParams) Validate() *Error {
	if e := checkID("sessionKey", p.SessionKey, MaxSessionKeyBytes); e != nil {
		return e
	}
	if p.Agent == "" {
		return InvalidParams("agent", "agent is required")
	}
	if p.Command == nil {
		return InvalidParams("command", "command is required")
	}
	if p.Command.Path == "" {
		return InvalidParams("command.path", "command.path is required")
	}
	if !filepath.IsAbs(p.Command.Path) {
		return InvalidParams("command.path", "command.path must be absolute")
	}
	for i, a := range p.Command.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return InvalidParams("command.args."+strconv.Itoa(i), "argument must not contain NUL")
		}
	}
	if p.Command.Sha256 != "" {
		if b, err := hex.DecodeString(p.Command.Sha256); err != nil || len(b) != 32 {
			return InvalidParams("command.sha256", "command.sha256 must be 64 hex digits")
		}
	}
	if p.Cwd == "" {
		return InvalidParams("cwd", "cwd is required")
	}
	if !filepath.IsAbs(p.Cwd) {
		return InvalidParams("cwd", "cwd must be absolute")
	}
	// Names in sorted order, so the first bad field is the same every time
	// (a map has no order of its own; found by FuzzOpenParams).
	names := make([]string, 0, len(p.Env))
	for k := range p.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return InvalidParams("env", "env names must be non-empty and contain no '=' or NUL")
		}
	}
	for _, k := range names {
		if v := p.Env[k]; strings.IndexByte(v, 0) >= 0 {
			return InvalidParams("env."+k, "env values must not contain NUL")
		}
	}
	for _, k := range []string{"HOME", "TMPDIR"} {
		// The agent's own directories: a relative one would name a
		// different place from each tool's working directory, and the
		// sandbox could neither make it nor let the tree write it.
		if v, ok := p.Env[k]; ok && v != "" && !filepath.IsAbs(v) {
			return InvalidParams("env."+k, "env."+k+" must be an absolute path")
		}
	}
	if p.StateDir != "" && !filepath.IsAbs(p.StateDir) {
		return InvalidParams("stateDir", "stateDir must be absolute")
	}
	if p.StateDir != "" {
		// One spelling per directory: "/s" and "/s/" are one store, one
		// ledger sweep, one set of key holds.
		p.StateDir = filepath.Clean(p.StateDir)
	}
	if p.PermissionMode == "" {
		p.PermissionMode = DefaultPermissionMode
	} else if !permissionModes[p.PermissionMode] {
		return InvalidParams("permissionMode", "permissionMode must be approve-all, approve-reads or deny-all")
	}
	if p.NonInteractivePermissions == "" {
		p.NonInteractivePermissions = DefaultNonInteractive
	} else if !nonInteractive[p.NonInteractivePermissions] {
		return InvalidParams("nonInteractivePermissions", "nonInteractivePermissions must be deny or fail")
	}
	if pp := p.PermissionPolicy; pp != nil {
		for _, l := range []struct {
			name  string
			kinds []string
		}{{"autoApprove", pp.AutoApprove}, {"autoDeny", pp.AutoDeny}, {"escalate", pp.Escalate}} {
			for i, k := range l.kinds {
				if !ToolKinds[k] {
					return InvalidParams("permissionPolicy."+l.name+"."+strconv.Itoa(i), "unknown ToolKind")
				}
			}
		}
		if pp.DefaultAction != "" && !policyActions[pp.DefaultAction] {
			return InvalidParams("permissionPolicy.defaultAction", "defaultAction must be approve, deny or escalate")
		}
	}
	if p.HandshakeTimeoutMs != nil && (*p.HandshakeTimeoutMs < defaultHandshakeMinMs || *p.HandshakeTimeoutMs > MaxHandshakeTimeoutMs) {
		return InvalidParams("handshakeTimeoutMs", "handshakeTimeoutMs must be 1-600000")
	}
	if e := p.validateSafety(); e != nil {
		return e
	}
	if e := p.Sandbox.validate(); e != nil {
		return e
	}
	if e := p.validateExt(); e != nil {
		return e
	}
	if e := p.validateLifecycleMembers(); e != nil {
		return e
	}
	if e := p.validateSeedControls(); e != nil {
		return e
	}
	for i, s := range p.McpServers {
		if !json.Valid(s) || len(s) == 0 || s[0] != '{' {
			return InvalidParams("mcpServers."+strconv.Itoa(i), "mcpServers entries must be objects")
		}
	}
	return nil
}

// Validate checks PromptParams: prompt must be a non-empty string or an
// array of ContentBlock objects.
func (p *PromptParams) Validate() *Error {
	if e := checkSession(p.Session); e != nil {
		return e
	}
	if e := checkID("requestId", p.RequestID, MaxRequestIDBytes); e != nil {
		return e
	}
	if len(p.Prompt) == 0 || string(p.Prompt) == "null" {
		return InvalidParams("prompt", "prompt is required")
	}
	switch p.Prompt[0] {
	case '"':
		var s string
		if err := json.Unmarshal(p.Prompt, &s); err != nil || s == "" {
			return InvalidParams("prompt", "prompt must be a non-empty string or ContentBlock[]")
		}
	case '[':
		var blocks []map[string]json.RawMessage
		if err := json.Unmarshal(p.Prompt, &blocks); err != nil || len(blocks) == 0 {
			return InvalidParams("prompt", "prompt must be a non-empty string or ContentBlock[]")
		}
		for i, b := range blocks {
			var typ string
			if json.Unmarshal(b["type"], &typ) != nil || typ == "" {
				return InvalidParams("prompt."+strconv.Itoa(i)+".type", "content block type is required")
			}
		}
	default:
		return InvalidParams("prompt", "prompt must be a non-empty string or ContentBlock[]")
	}
	if p.TimeoutMs != nil && (*p.TimeoutMs < 1 || *p.TimeoutMs > maxPromptTimeoutMs) {
		return InvalidParams("timeoutMs", "timeoutMs must be 1-86400000")
	}
	return checkMeta(p.Meta)
}

// Validate checks SessionRef.
func (p *SessionRef) Validate() *Error { return checkSession(p.Session) }

// Validate checks CancelParams.
func (p *CancelParams) Validate() *Error { return checkSession(p.Session) }

// Validate checks CloseParams; reason defaults to "host close".
func (p *CloseParams) Validate() *Error {
	if e := checkSession(p.Session); e != nil {
		return e
	}
	if p.Reason == "" {
		p.Reason = "host close"
	}
	return nil
}

// Validate checks SetModelParams.
func (p *SetModelParams) Validate() *Error {
	if e := checkSession(p.Session); e != nil {
		return e
	}
	if p.Model == "" {
		return InvalidParams("model", "model is required")
	}
	return nil
}

// Validate checks SetModeParams.
func (p *SetModeParams) Validate() *Error {
	if e := checkSession(p.Session); e != nil {
		return e
	}
	if p.Mode == "" {
		return InvalidParams("mode", "mode is required")
	}
	return nil
}

// Validate checks SetConfigOptionParams.
func (p *SetConfigOptionParams) Validate() *Error {
	if e := checkSession(p.Session); e != nil {
		return e
	}
	if p.Key == "" {
		return InvalidParams("key", "key is required")
	}
	if len(p.Value) == 0 || string(p.Value) == "null" {
		return InvalidParams("value", "value is required")
	}
	// ACP session config values are select ids (strings) or booleans.
	if v := p.Value[0]; v != '"' && string(p.Value) != "true" && string(p.Value) != "false" {
		return InvalidParams("value", "value must be a string or a boolean")
	}
	return nil
}

// checkAbsPath refuses a path that is empty, relative or holds NUL.
func checkAbsPath(field, v string) *Error {
	switch {
	case v == "" || !filepath.IsAbs(v):
		return InvalidParams(field, field+" must be an absolute path")
	case strings.IndexByte(v, 0) >= 0:
		return InvalidParams(field, field+" must not contain NUL")
	}
	return nil
}
