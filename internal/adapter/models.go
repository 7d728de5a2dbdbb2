package adapter

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// setModel selects model name and verifies it, by the agent's own
// mechanism (docs/agents.md, model control):
//   - the config option of category "model" when it offers name;
//   - else, for an id "base[effort]" (codex-acp 2.x lists its models so,
//     while its model option offers only "base"), the model option set to
//     base and the option of category "thought_level" set to effort;
//   - else the legacy ACP session/set_model (it left the spec in 2026-06),
//     for agents without a model option, or whose listed models hold name.
//
// Each config option is verified against the options the agent returns.
// Errors: MODEL_UNAVAILABLE (not offered, refused or not applied),
// UNSUPPORTED_CONTROL, ACPX_SESSION_ENSURE_FAILED.
func (c *controls) setModel(ctx context.Context, name string) *protocol.Error {
	unavailable := protocol.Domain(protocol.ErrModelUnavailable, "the agent does not offer model "+c.red.Clean(quoteShort(name)), false)
	if c.models != nil && !contains(c.models.AvailableModelIDs, name) {
		return unavailable
	}
	_, modelValues, hasOption := selectValues(c.configOpts, "model")
	base, effort, split := splitEffort(name)
	_, efforts, hasEffort := selectValues(c.configOpts, "thought_level")
	switch {
	case hasOption && contains(modelValues, name):
		if e := c.setVerified(ctx, "model", name, unavailable); e != nil {
			return e
		}
		c.usedStyle = profiles.ModelControlConfigOption
	case hasOption && split && contains(modelValues, base) && hasEffort && contains(efforts, effort):
		if e := c.setVerified(ctx, "model", base, unavailable); e != nil {
			return e
		}
		if e := c.setVerified(ctx, "thought_level", effort, unavailable); e != nil {
			return e
		}
		c.usedStyle = profiles.ModelControlConfigOption
	case hasOption && c.models == nil:
		return unavailable
	default:
		if err := c.conn.call(ctx, "session/set_model", map[string]any{"sessionId": c.backendSessionID, "modelId": name}, nil); err != nil {
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
}

// setVerified sets the config option of category (or id) cat to value and
// checks the agent then reports value as its current value.
func (c *controls) setVerified(ctx context.Context, cat, value string, unavailable *protocol.Error) *protocol.Error {
	opt := c.findOption(func(o configOption) bool { return o.ID == cat || o.Category == cat })
	if opt == nil {
		return unavailable
	}
	raw, _ := json.Marshal(value)
	if err := c.setOption(ctx, opt.ID, raw); err != nil {
		return c.controlError(unavailable, err)
	}
	now := c.findOption(func(o configOption) bool { return o.ID == opt.ID })
	if now == nil || string(now.CurrentValue) != string(raw) {
		return unavailable
	}
	return nil
}

// splitEffort splits "base[effort]" (codex-acp 2.x model ids) into its
// parts; ok is false for any other shape.
func splitEffort(id string) (base, effort string, ok bool) {
	i := strings.LastIndexByte(id, '[')
	if i <= 0 || !strings.HasSuffix(id, "]") || i+2 > len(id)-1 {
		return "", "", false
	}
	return id[:i], id[i+1 : len(id)-1], true
}

// listedModelID maps the model option's current value to the id the agent
// lists in `models`: value itself when listed, else "value[effort]" with the
// current value of the option of category "thought_level" when that is
// listed (codex-acp 2.x lists "gpt-5.5[medium]" while its model option
// says "gpt-5.5"), else value.
func listedModelID(opts []json.RawMessage, value string, listed []string) string {
	if contains(listed, value) {
		return value
	}
	if effort, _, ok := selectValues(opts, "thought_level"); ok && effort != "" {
		if id := value + "[" + effort + "]"; contains(listed, id) {
			return id
		}
	}
	return value
}

// cloneModels copies m for a worker (the actor updates CurrentModelID in
// place); nil stays nil.
func cloneModels(m *protocol.Models) *protocol.Models {
	if m == nil {
		return nil
	}
	c := *m
	return &c
}

// cloneModes copies m for a worker; nil stays nil.
func cloneModes(m *protocol.Modes) *protocol.Modes {
	if m == nil {
		return nil
	}
	c := *m
	return &c
}
