package adapter

import (
	"context"
	"encoding/json"
	"errors"

	acp "github.com/coder/acp-go-sdk"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/protocol"
	"github.com/acpx-sidecar/acpx-sidecar/internal/rpc"
)

type controlKind int

const (
	controlModel controlKind = iota
	controlMode
	controlOption
)

// configOption is the part of an ACP SessionConfigOption the sidecar reads.
type configOption struct {
	ID           string          `json:"id"`
	Category     string          `json:"category"`
	Type         string          `json:"type"`
	CurrentValue json.RawMessage `json:"currentValue"`
}

// controls selects a model, mode or config option and verifies it against
// what the agent then reports (SEED-BEHAVIOR 24). It works on copies and
// runs off the actor; the actor adopts models/modes/configOpts after.
type controls struct {
	conn       *acpConn
	sessionID  string
	models     *protocol.Models
	modes      *protocol.Modes
	configOpts []json.RawMessage
	style      string // profile's preferred style
	usedStyle  string // style actually used last
	red        *redactor
}

func (c *controls) findOption(pred func(configOption) bool) *configOption {
	for _, raw := range c.configOpts {
		var o configOption
		if json.Unmarshal(raw, &o) == nil && pred(o) {
			return &o
		}
	}
	return nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func isMethodNotFound(err error) bool {
	var je *jsonrpc2.Error
	return errors.As(err, &je) && je.Code == jsonrpc2.CodeMethodNotFound
}

// setOption sends session/set_config_option and adopts the returned options.
func (c *controls) setOption(ctx context.Context, id string, value json.RawMessage) error {
	var res struct {
		ConfigOptions []json.RawMessage `json:"configOptions"`
	}
	var req acp.SetSessionConfigOptionRequest
	var b bool
	if json.Unmarshal(value, &b) == nil {
		req.Boolean = &acp.SetSessionConfigOptionBoolean{SessionId: acp.SessionId(c.sessionID), ConfigId: acp.SessionConfigId(id), Type: "boolean", Value: b}
	} else {
		var v string
		if json.Unmarshal(value, &v) != nil {
			return &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: "config option values are strings or booleans"}
		}
		req.ValueId = &acp.SetSessionConfigOptionValueId{SessionId: acp.SessionId(c.sessionID), ConfigId: acp.SessionConfigId(id), Value: acp.SessionConfigValueId(v)}
	}
	err := c.conn.call(ctx, acp.AgentMethodSessionSetConfigOption, req, &res)
	if err == nil && res.ConfigOptions != nil {
		c.configOpts = res.ConfigOptions
	}
	return err
}

// set selects value for kind (for controlOption, name is the option id and
// raw its value). Errors: MODEL_UNAVAILABLE, MODE_UNAVAILABLE,
// UNSUPPORTED_CONTROL, or ACPX_SESSION_ENSURE_FAILED for agent errors.
func (c *controls) set(ctx context.Context, kind controlKind, name string, raw json.RawMessage) *protocol.Error {
	switch kind {
	case controlModel:
		unavailable := protocol.Domain(protocol.ErrModelUnavailable, "the agent does not offer model "+quoteShort(name), false)
		if c.models != nil && !contains(c.models.AvailableModelIDs, name) {
			return unavailable
		}
		value, _ := json.Marshal(name)
		opt := c.findOption(func(o configOption) bool { return o.ID == "model" || o.Category == "model" })
		if opt != nil && c.style == profiles.ModelControlConfigOption {
			if err := c.setOption(ctx, opt.ID, value); err != nil {
				return c.controlError(unavailable, err)
			}
			c.usedStyle = profiles.ModelControlConfigOption
			now := c.findOption(func(o configOption) bool { return o.ID == opt.ID })
			if now == nil || string(now.CurrentValue) != string(value) {
				return unavailable
			}
		} else {
			if err := c.conn.call(ctx, "session/set_model", map[string]any{"sessionId": c.sessionID, "modelId": name}, nil); err != nil {
				return c.controlError(unavailable, err)
			}
			c.usedStyle = profiles.ModelControlLegacy
		}
		if c.models == nil {
			c.models = &protocol.Models{AvailableModelIDs: []string{}}
		}
		m := *c.models
		m.CurrentModelID = name
		c.models = &m
		return nil
	case controlMode:
		unavailable := protocol.Domain(protocol.ErrModeUnavailable, "the agent does not offer mode "+quoteShort(name), false)
		if c.modes == nil {
			return protocol.Domain(protocol.ErrUnsupportedControl, "the agent reports no modes", false)
		}
		if !contains(c.modes.AvailableModeIDs, name) {
			return unavailable
		}
		if err := c.conn.call(ctx, acp.AgentMethodSessionSetMode, acp.SetSessionModeRequest{SessionId: acp.SessionId(c.sessionID), ModeId: acp.SessionModeId(name)}, nil); err != nil {
			return c.controlError(unavailable, err)
		}
		m := *c.modes
		m.CurrentModeID = name
		c.modes = &m
		if opt := c.findOption(func(o configOption) bool { return o.ID == "mode" || o.Category == "mode" }); opt != nil {
			c.patchOption(opt.ID, name)
		}
		return nil
	default:
		opt := c.findOption(func(o configOption) bool { return o.ID == name })
		if opt == nil {
			return protocol.Domain(protocol.ErrUnsupportedControl, "the agent has no config option "+quoteShort(name), false)
		}
		if err := c.setOption(ctx, name, raw); err != nil {
			return c.controlError(protocol.Domain(protocol.ErrUnsupportedControl, "the agent refused config option "+quoteShort(name), false), err)
		}
		now := c.findOption(func(o configOption) bool { return o.ID == name })
		if now == nil || !jsonEqual(now.CurrentValue, raw) {
			return protocol.Domain(protocol.ErrUnsupportedControl, "the agent did not apply config option "+quoteShort(name), false)
		}
		if opt.ID == "model" || opt.Category == "model" {
			var v string
			if json.Unmarshal(raw, &v) == nil && c.models != nil {
				m := *c.models
				m.CurrentModelID = v
				c.models = &m
			}
		}
		return nil
	}
}

// patchOption sets currentValue of option id in our copy.
func (c *controls) patchOption(id, value string) {
	out := make([]json.RawMessage, 0, len(c.configOpts))
	for _, raw := range c.configOpts {
		var m map[string]json.RawMessage
		var o configOption
		if json.Unmarshal(raw, &o) == nil && o.ID == id && json.Unmarshal(raw, &m) == nil {
			m["currentValue"], _ = json.Marshal(value)
			raw, _ = json.Marshal(m)
		}
		out = append(out, raw)
	}
	c.configOpts = out
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

func (c *controls) controlError(unavailable *protocol.Error, err error) *protocol.Error {
	if isMethodNotFound(err) {
		return protocol.Domain(protocol.ErrUnsupportedControl, "the agent does not support this control", false)
	}
	var je *jsonrpc2.Error
	if errors.As(err, &je) {
		unavailable.Message += ": " + c.red.clean(je.Message)
		return unavailable
	}
	return protocol.Domain(protocol.ErrEnsureFailed, "the control request failed: "+c.red.clean(err.Error()), true)
}

// control handles setModel/setMode/setConfigOption on the actor: the
// request runs off the actor, the result is adopted on it.
func (s *session) control(kind controlKind, name string, raw json.RawMessage, reply rpc.Reply) {
	if e := s.usable(); e != nil {
		reply(nil, e)
		return
	}
	ctl := &controls{conn: s.conn, sessionID: s.identity.BackendSessionID, models: s.models, modes: s.modes,
		configOpts: s.configOpts, style: s.prof.ModelControl, usedStyle: s.modelCtl, red: s.red}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.m.cfg.HandshakeTimeout)
		defer cancel()
		e := ctl.set(ctx, kind, name, raw)
		s.post(func() {
			if e != nil {
				reply(nil, e)
				return
			}
			s.models, s.modes, s.configOpts, s.modelCtl = ctl.models, ctl.modes, ctl.configOpts, ctl.usedStyle
			s.persist(nil)
			switch kind {
			case controlModel:
				reply(map[string]any{"models": s.models}, nil)
			case controlMode:
				reply(map[string]any{"modes": s.modes}, nil)
			default:
				reply(map[string]any{"configOptions": s.configOpts}, nil)
			}
		})
	}()
}

// usable returns the error for a request that needs a live session.
func (s *session) usable() *protocol.Error {
	switch s.state {
	case stateAdmitting:
		return protocol.Domain(protocol.ErrSessionNotFound, "the session is still being admitted", true)
	case stateClosing, stateClosed:
		return protocol.Domain(protocol.ErrSessionClosing, "the session is closing or closed", false)
	case stateDead:
		return protocol.Domain(protocol.ErrProviderProcessLost, "the provider process is gone", false)
	}
	return nil
}
