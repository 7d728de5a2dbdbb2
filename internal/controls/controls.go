// Package controls holds a session's agent controls (docs/protocol.md §10,
// §24): selecting a model, mode or config option through the agent's own
// mechanism and verifying it against what the agent then reports
// (docs/rules.md#r24); the seed's controls — the open's effort and
// thinking, the options and modes that keep an agent asking, held against
// drift; and the permission binding's checks (docs/agents.md, "How the
// profile binds it"). The session actor (internal/session) owns the state;
// this package decides and talks to the agent through a Caller.
package controls

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	acp "github.com/coder/acp-go-sdk"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Kind is what a control request selects.
type Kind int

// The kinds of control request: session/setModel, session/setMode and
// session/setConfigOption (docs/protocol.md §10).
const (
	KindModel Kind = iota
	KindMode
	KindOption
)

// Caller sends one ACP request to the agent and waits for its answer or
// ctx: params is encoded as the request's params and the result decoded
// into result (nil: ignored). An error the agent answers is a
// *jsonrpc2.Error (a -32601 one makes the control UNSUPPORTED_CONTROL);
// when ctx ends first Call returns an error at once (the implementation
// may tell the agent the request is cancelled).
type Caller interface {
	Call(ctx context.Context, method string, params, result any) error
}

// ConfigOption is the part of an ACP SessionConfigOption the sidecar reads.
type ConfigOption struct {
	// ID is ACP id, the option's id (what setConfigOption names).
	ID string `json:"id"`
	// Category is ACP category (e.g. "model", "mode"); "" when absent.
	Category string `json:"category"`
	// Type is ACP type (e.g. "select", "boolean"); "" when absent.
	Type string `json:"type"`
	// CurrentValue is ACP currentValue as JSON (a string or a boolean);
	// nil when absent.
	CurrentValue json.RawMessage `json:"currentValue"`
}

// Setter selects a model, mode or config option and verifies it against
// what the agent then reports (docs/rules.md#r24). It works on copies and
// runs off the actor; the actor adopts Models, Modes, ConfigOpts and
// UsedStyle after.
type Setter struct {
	Conn             Caller            // the agent's ACP connection
	BackendSessionID string            // the agent's session id
	Models           *protocol.Models  // the agent's models; replaced, never changed in place
	Modes            *protocol.Modes   // the agent's modes; replaced, never changed in place
	ConfigOpts       []json.RawMessage // ACP SessionConfigOptions, cleaned (jsonl.CleanRaws)
	UsedStyle        string            // model control style actually used last (profiles.ModelControl*)
	// Clean redacts the agent's text that goes into an error message
	// (launch secrets, docs/rules.md#r3); nil leaves it as it is.
	Clean func(string) string
}

// clean is c.Clean(text), or text without one.
func (c *Setter) clean(text string) string {
	if c.Clean == nil {
		return text
	}
	return c.Clean(text)
}

func (c *Setter) findOption(pred func(ConfigOption) bool) *ConfigOption {
	return findOption(c.ConfigOpts, pred)
}

// findOption returns the first of opts that pred accepts, decoded; nil if
// none does.
func findOption(opts []json.RawMessage, pred func(ConfigOption) bool) *ConfigOption {
	for _, raw := range opts {
		var o ConfigOption
		if json.Unmarshal(raw, &o) == nil && pred(o) {
			return &o
		}
	}
	return nil
}

func isMethodNotFound(err error) bool {
	var je *jsonrpc2.Error
	return errors.As(err, &je) && je.Code == jsonrpc2.CodeMethodNotFound
}

// setOption sends session/set_config_option and adopts the returned options.
func (c *Setter) setOption(ctx context.Context, id string, value json.RawMessage) error {
	var res struct {
		ConfigOptions []json.RawMessage `json:"configOptions"`
	}
	var req acp.SetSessionConfigOptionRequest
	var b bool
	if json.Unmarshal(value, &b) == nil {
		req.Boolean = &acp.SetSessionConfigOptionBoolean{SessionId: acp.SessionId(c.BackendSessionID), ConfigId: acp.SessionConfigId(id), Type: "boolean", Value: b}
	} else {
		var v string
		if json.Unmarshal(value, &v) != nil {
			return &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: "config option values are strings or booleans"}
		}
		req.ValueId = &acp.SetSessionConfigOptionValueId{SessionId: acp.SessionId(c.BackendSessionID), ConfigId: acp.SessionConfigId(id), Value: acp.SessionConfigValueId(v)}
	}
	err := c.Conn.Call(ctx, acp.AgentMethodSessionSetConfigOption, req, &res)
	if err == nil && res.ConfigOptions != nil {
		c.ConfigOpts = jsonl.CleanRaws(res.ConfigOptions)
	}
	return err
}

// Set selects value for kind (for KindOption, name is the option id and
// raw its value). Errors: MODEL_UNAVAILABLE, MODE_UNAVAILABLE,
// UNSUPPORTED_CONTROL, or ACPX_SESSION_ENSURE_FAILED for agent errors.
func (c *Setter) Set(ctx context.Context, kind Kind, name string, raw json.RawMessage) *protocol.Error {
	switch kind {
	case KindModel:
		return c.setModel(ctx, name)
	case KindMode:
		_, e := c.setMode(ctx, name)
		return e
	default:
		opt := c.findOption(func(o ConfigOption) bool { return o.ID == name })
		if opt == nil {
			return protocol.Domain(protocol.ErrUnsupportedControl, "the agent has no config option "+c.clean(protocol.QuoteShort(name)), false)
		}
		if err := c.setOption(ctx, name, raw); err != nil {
			return c.controlError(protocol.Domain(protocol.ErrUnsupportedControl, "the agent refused config option "+c.clean(protocol.QuoteShort(name)), false), err)
		}
		now := c.findOption(func(o ConfigOption) bool { return o.ID == name })
		if now == nil || !jsonEqual(now.CurrentValue, raw) {
			return protocol.Domain(protocol.ErrUnsupportedControl, "the agent did not apply config option "+c.clean(protocol.QuoteShort(name)), false)
		}
		var v string
		switch {
		case json.Unmarshal(raw, &v) != nil:
		case opt.ID == "model" || opt.Category == "model":
			if c.Models != nil {
				m := *c.Models
				m.CurrentModelID = v
				c.Models = &m
			}
		case isModeOption(*opt):
			if c.Modes != nil {
				m := *c.Modes
				m.CurrentModeID = v
				c.Modes = &m
			}
		}
		return nil
	}
}

// isModeOption reports whether o is the agent's mode: id or category
// "mode".
func isModeOption(o ConfigOption) bool { return o.ID == "mode" || o.Category == "mode" }

// IsOption reports whether config option id (of opts) is the one of
// category cat.
func IsOption(opts []json.RawMessage, id, cat string) bool {
	o := findOption(opts, func(o ConfigOption) bool { return o.ID == id })
	return o != nil && (o.ID == cat || o.Category == cat)
}

// setMode selects mode name and verifies it: through the config option of
// category "mode" where the agent has one (verified against the options it
// returns), else ACP session/set_mode. It returns the ACP method used.
// Errors: UNSUPPORTED_CONTROL (no modes at all), MODE_UNAVAILABLE (not
// offered, refused or not applied), ACPX_SESSION_ENSURE_FAILED.
func (c *Setter) setMode(ctx context.Context, name string) (string, *protocol.Error) {
	unavailable := protocol.Domain(protocol.ErrModeUnavailable, "the agent does not offer mode "+c.clean(protocol.QuoteShort(name)), false)
	opt := c.findOption(isModeOption)
	if c.Modes == nil && opt == nil {
		return "", protocol.Domain(protocol.ErrUnsupportedControl, "the agent reports no modes", false)
	}
	if c.Modes != nil && !slices.Contains(c.Modes.AvailableModeIDs, name) {
		return "", unavailable
	}
	via := acp.AgentMethodSessionSetConfigOption
	if opt != nil {
		if e := c.setVerified(ctx, "mode", name, unavailable); e != nil {
			return "", e
		}
	} else {
		via = acp.AgentMethodSessionSetMode
		if err := c.Conn.Call(ctx, acp.AgentMethodSessionSetMode, acp.SetSessionModeRequest{SessionId: acp.SessionId(c.BackendSessionID), ModeId: acp.SessionModeId(name)}, nil); err != nil {
			return "", c.controlError(unavailable, err)
		}
	}
	if c.Modes != nil {
		m := *c.Modes
		m.CurrentModeID = name
		c.Modes = &m
	}
	return via, nil
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func (c *Setter) controlError(unavailable *protocol.Error, err error) *protocol.Error {
	if isMethodNotFound(err) {
		return protocol.Domain(protocol.ErrUnsupportedControl, "the agent does not support this control", false)
	}
	var je *jsonrpc2.Error
	if errors.As(err, &je) {
		unavailable.Message += ": " + c.clean(je.Message)
		return unavailable
	}
	return protocol.Domain(protocol.ErrEnsureFailed, "the control request failed: "+c.clean(err.Error()), true)
}

// ModeNamed returns the mode a control request selects: the name of a
// setMode, or the value of a setConfigOption whose option (of opts) is the
// mode.
func ModeNamed(opts []json.RawMessage, kind Kind, name string, raw json.RawMessage) (string, bool) {
	switch kind {
	case KindMode:
		return name, true
	case KindOption:
		var v string
		if IsOption(opts, name, "mode") && json.Unmarshal(raw, &v) == nil {
			return v, true
		}
	}
	return "", false
}
