package adapter

import (
	"context"
	"encoding/json"
	"errors"

	acp "github.com/coder/acp-go-sdk"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/redact"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
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

// controlState is the session's agent controls as last reported or set
// (docs/protocol.md §10): the agent's models, modes and config options, the
// control style that sets a model, the host's pins re-applied on resume and
// the permission binding. Actor-owned; a controls worker gets a copy
// (controls).
type controlState struct {
	models     *protocol.Models
	modes      *protocol.Modes
	configOpts []json.RawMessage
	modelCtl   string
	pins       pins // the host's model and mode, re-applied on resume
	binding    protocol.PermissionBinding
	held       heldState        // controls held against drift (seedcontrols.go)
	final      admittedControls // the admission's last answers (armHeld)
}

// controls selects a model, mode or config option and verifies it against
// what the agent then reports (docs/rules.md#r24). It works on copies and
// runs off the actor; the actor adopts models/modes/configOpts after.
type controls struct {
	conn             *acpConn
	backendSessionID string
	models           *protocol.Models
	modes            *protocol.Modes
	configOpts       []json.RawMessage
	usedStyle        string // style actually used last
	red              *redact.Redactor
}

func (c *controls) findOption(pred func(configOption) bool) *configOption {
	return findOption(c.configOpts, pred)
}

// findOption returns the first of opts that pred accepts, decoded; nil if
// none does.
func findOption(opts []json.RawMessage, pred func(configOption) bool) *configOption {
	for _, raw := range opts {
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
		req.Boolean = &acp.SetSessionConfigOptionBoolean{SessionId: acp.SessionId(c.backendSessionID), ConfigId: acp.SessionConfigId(id), Type: "boolean", Value: b}
	} else {
		var v string
		if json.Unmarshal(value, &v) != nil {
			return &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: "config option values are strings or booleans"}
		}
		req.ValueId = &acp.SetSessionConfigOptionValueId{SessionId: acp.SessionId(c.backendSessionID), ConfigId: acp.SessionConfigId(id), Value: acp.SessionConfigValueId(v)}
	}
	err := c.conn.call(ctx, acp.AgentMethodSessionSetConfigOption, req, &res)
	if err == nil && res.ConfigOptions != nil {
		c.configOpts = jsonl.CleanRaws(res.ConfigOptions)
	}
	return err
}

// set selects value for kind (for controlOption, name is the option id and
// raw its value). Errors: MODEL_UNAVAILABLE, MODE_UNAVAILABLE,
// UNSUPPORTED_CONTROL, or ACPX_SESSION_ENSURE_FAILED for agent errors.
func (c *controls) set(ctx context.Context, kind controlKind, name string, raw json.RawMessage) *protocol.Error {
	switch kind {
	case controlModel:
		return c.setModel(ctx, name)
	case controlMode:
		_, e := c.setMode(ctx, name)
		return e
	default:
		opt := c.findOption(func(o configOption) bool { return o.ID == name })
		if opt == nil {
			return protocol.Domain(protocol.ErrUnsupportedControl, "the agent has no config option "+c.red.Clean(quoteShort(name)), false)
		}
		if err := c.setOption(ctx, name, raw); err != nil {
			return c.controlError(protocol.Domain(protocol.ErrUnsupportedControl, "the agent refused config option "+c.red.Clean(quoteShort(name)), false), err)
		}
		now := c.findOption(func(o configOption) bool { return o.ID == name })
		if now == nil || !jsonEqual(now.CurrentValue, raw) {
			return protocol.Domain(protocol.ErrUnsupportedControl, "the agent did not apply config option "+c.red.Clean(quoteShort(name)), false)
		}
		var v string
		switch {
		case json.Unmarshal(raw, &v) != nil:
		case opt.ID == "model" || opt.Category == "model":
			if c.models != nil {
				m := *c.models
				m.CurrentModelID = v
				c.models = &m
			}
		case isModeOption(*opt):
			if c.modes != nil {
				m := *c.modes
				m.CurrentModeID = v
				c.modes = &m
			}
		}
		return nil
	}
}

func isModeOption(o configOption) bool { return o.ID == "mode" || o.Category == "mode" }

// setMode selects mode name and verifies it: through the config option of
// category "mode" where the agent has one (verified against the options it
// returns), else ACP session/set_mode. It returns the ACP method used.
// Errors: UNSUPPORTED_CONTROL (no modes at all), MODE_UNAVAILABLE (not
// offered, refused or not applied), ACPX_SESSION_ENSURE_FAILED.
func (c *controls) setMode(ctx context.Context, name string) (string, *protocol.Error) {
	unavailable := protocol.Domain(protocol.ErrModeUnavailable, "the agent does not offer mode "+c.red.Clean(quoteShort(name)), false)
	opt := c.findOption(isModeOption)
	if c.modes == nil && opt == nil {
		return "", protocol.Domain(protocol.ErrUnsupportedControl, "the agent reports no modes", false)
	}
	if c.modes != nil && !contains(c.modes.AvailableModeIDs, name) {
		return "", unavailable
	}
	via := acp.AgentMethodSessionSetConfigOption
	if opt != nil {
		if e := c.setVerified(ctx, "mode", name, unavailable); e != nil {
			return "", e
		}
	} else {
		via = acp.AgentMethodSessionSetMode
		if err := c.conn.call(ctx, acp.AgentMethodSessionSetMode, acp.SetSessionModeRequest{SessionId: acp.SessionId(c.backendSessionID), ModeId: acp.SessionModeId(name)}, nil); err != nil {
			return "", c.controlError(unavailable, err)
		}
	}
	if c.modes != nil {
		m := *c.modes
		m.CurrentModeID = name
		c.modes = &m
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

func (c *controls) controlError(unavailable *protocol.Error, err error) *protocol.Error {
	if isMethodNotFound(err) {
		return protocol.Domain(protocol.ErrUnsupportedControl, "the agent does not support this control", false)
	}
	var je *jsonrpc2.Error
	if errors.As(err, &je) {
		unavailable.Message += ": " + c.red.Clean(je.Message)
		return unavailable
	}
	return protocol.Domain(protocol.ErrEnsureFailed, "the control request failed: "+c.red.Clean(err.Error()), true)
}

// control handles setModel/setMode/setConfigOption on the actor: the
// request runs off the actor, the result is adopted on it.
func (s *session) control(kind controlKind, name string, raw json.RawMessage, reply Reply) {
	if e := s.usable(); e != nil {
		reply(nil, e)
		return
	}
	if e := s.checkHeldControl(kind, name, raw); e != nil { // seedcontrols.go
		reply(nil, e)
		return
	}
	if mode, ok := s.modeNamed(kind, name, raw); ok {
		// A mode in which the agent decides alone would leave the policy
		// unenforced (docs/agents.md).
		if e := checkModeChange(s.prof, s.open, mode, s.ctl.modes); e != nil {
			reply(nil, e)
			return
		}
	}
	key := s.heldKey(kind, name)
	s.ctl.held.settle(key, 1) // what the agent reports while applying it is not a breach
	// The worker's input: copies, since the actor keeps updating its own
	// models and modes in place (trackUpdate) while the request runs. The
	// worker replaces what it changes, so only a replaced value is adopted.
	models, modes := cloneModels(s.ctl.models), cloneModes(s.ctl.modes)
	ctl := &controls{conn: s.conn, backendSessionID: s.rec.identity.BackendSessionID, models: models, modes: modes,
		configOpts: s.ctl.configOpts, usedStyle: s.ctl.modelCtl, red: s.red}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.m.cfg.Bounds.HandshakeTimeout)
		defer cancel()
		e := ctl.set(ctx, kind, name, raw)
		s.post(func() {
			s.ctl.held.settle(key, -1)
			if e != nil {
				reply(nil, e)
				s.checkHeld()
				return
			}
			if ctl.models != models {
				s.ctl.models = ctl.models
			}
			if ctl.modes != modes {
				s.ctl.modes = ctl.modes
			}
			s.ctl.configOpts, s.ctl.modelCtl = ctl.configOpts, ctl.usedStyle
			s.act.snapDirty = true
			// What the host selects is pinned: re-applied on resume.
			if s.ctl.models != nil && (kind == controlModel || s.isOption(name, "model")) {
				s.ctl.pins.model = s.ctl.models.CurrentModelID
			}
			if kind == controlOption && !s.isOption(name, "model") && !s.isOption(name, "mode") {
				s.ctl.pins = s.ctl.pins.withOption(name, raw) // re-applied by a revive
			}
			if mode, ok := s.modeNamed(kind, name, raw); ok {
				s.ctl.pins.mode = mode
				// The host chose the mode: the binding now says so
				// (checkModeChange let an autonomous one through only
				// under a plain approve-all).
				if b := s.prof.Binding; len(b.AskModes) > 0 {
					s.ctl.binding = protocol.PermissionBinding{Bound: b.Asks(mode), Mode: mode, Via: viaHostMode, Autonomous: !b.Asks(mode)}
				} else {
					s.ctl.binding.Mode = mode // bound by launch settings, or not at all
				}
			}
			s.heldAfterControl(key)
			s.checkHeld()
			s.persist(nil)
			s.flushOut() // the updates the agent sent before its answer go first
			switch kind {
			case controlModel:
				reply(map[string]any{"models": s.ctl.models}, nil)
			case controlMode:
				reply(map[string]any{"modes": s.ctl.modes}, nil)
			default:
				reply(map[string]any{"configOptions": s.ctl.configOpts}, nil)
			}
		})
	}()
}

// modeNamed returns the mode a control request selects: the name of a
// setMode, or the value of a setConfigOption whose option is the mode.
func (s *session) modeNamed(kind controlKind, name string, raw json.RawMessage) (string, bool) {
	switch kind {
	case controlMode:
		return name, true
	case controlOption:
		var v string
		if s.isOption(name, "mode") && json.Unmarshal(raw, &v) == nil {
			return v, true
		}
	}
	return "", false
}

// isOption reports whether config option id is the one of category cat.
func (s *session) isOption(id, cat string) bool {
	o := findOption(s.ctl.configOpts, func(o configOption) bool { return o.ID == id })
	return o != nil && (o.ID == cat || o.Category == cat)
}

// usable returns the error for a request that needs a live session.
func (s *session) usable() *protocol.Error {
	switch s.state.current() {
	case protocol.StateAdmitting:
		return protocol.Domain(protocol.ErrSessionNotFound, "the session is still being admitted", true)
	case protocol.StateClosing, protocol.StateClosed:
		return protocol.Domain(protocol.ErrSessionClosing, "the session is closing or closed", false)
	case protocol.StateDead:
		return protocol.Domain(protocol.ErrProviderProcessLost, "the provider process is gone", false)
	case protocol.StateRetiring, protocol.StateParked, protocol.StateReviving:
		// Calls that need the agent wait for a revive (withAgent); what
		// cannot wait is refused, retryable.
		return protocol.Domain(protocol.ErrSessionNotFound, "the session's tree is not running ("+string(s.state.current())+"); a prompt revives it", true)
	}
	if s.turns.lostInTurn {
		// The connection died during a turn and the exit is not seen yet:
		// the session is as good as dead, and answers as it will then.
		return protocol.Domain(protocol.ErrProviderProcessLost, "the provider process is gone", false)
	}
	return nil
}
