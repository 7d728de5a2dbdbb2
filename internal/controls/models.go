package controls

import (
	"context"
	"encoding/json"
	"slices"
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
func (c *Setter) setModel(ctx context.Context, name string) *protocol.Error {
	unavailable := protocol.Domain(protocol.ErrModelUnavailable, "the agent does not offer model "+c.clean(protocol.QuoteShort(name)), false)
	if c.Models != nil && !slices.Contains(c.Models.AvailableModelIDs, name) {
		return unavailable
	}
	_, modelValues, hasOption := selectValues(c.ConfigOpts, "model")
	base, effort, split := splitEffort(name)
	_, efforts, hasEffort := selectValues(c.ConfigOpts, "thought_level")
	switch {
	case hasOption && slices.Contains(modelValues, name):
		if e := c.setVerified(ctx, "model", name, unavailable); e != nil {
			return e
		}
		c.UsedStyle = profiles.ModelControlConfigOption
	case hasOption && split && slices.Contains(modelValues, base) && hasEffort && slices.Contains(efforts, effort):
		if e := c.setVerified(ctx, "model", base, unavailable); e != nil {
			return e
		}
		if e := c.setVerified(ctx, "thought_level", effort, unavailable); e != nil {
			return e
		}
		c.UsedStyle = profiles.ModelControlConfigOption
	case hasOption && c.Models == nil:
		return unavailable
	default:
		if err := c.Conn.Call(ctx, "session/set_model", map[string]any{"sessionId": c.BackendSessionID, "modelId": name}, nil); err != nil {
			return c.controlError(unavailable, err)
		}
		c.UsedStyle = profiles.ModelControlLegacy
	}
	if c.Models == nil {
		c.Models = &protocol.Models{AvailableModelIDs: []string{}}
	}
	m := *c.Models
	m.CurrentModelID = name
	c.Models = &m
	return nil
}

// setVerified sets the config option of category (or id) cat to value and
// checks the agent then reports value as its current value.
func (c *Setter) setVerified(ctx context.Context, cat, value string, unavailable *protocol.Error) *protocol.Error {
	opt := c.findOption(func(o ConfigOption) bool { return o.ID == cat || o.Category == cat })
	if opt == nil {
		return unavailable
	}
	raw, _ := json.Marshal(value)
	if err := c.setOption(ctx, opt.ID, raw); err != nil {
		return c.controlError(unavailable, err)
	}
	now := c.findOption(func(o ConfigOption) bool { return o.ID == opt.ID })
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

// ListedModelID maps the model option's current value to the id the agent
// lists in `models`: value itself when listed, else "value[effort]" with the
// current value of the option of category "thought_level" when that is
// listed (codex-acp 2.x lists "gpt-5.5[medium]" while its model option
// says "gpt-5.5"), else value.
func ListedModelID(opts []json.RawMessage, value string, listed []string) string {
	if slices.Contains(listed, value) {
		return value
	}
	if effort, _, ok := selectValues(opts, "thought_level"); ok && effort != "" {
		if id := value + "[" + effort + "]"; slices.Contains(listed, id) {
			return id
		}
	}
	return value
}

// CloneModels copies m for a worker (the actor updates CurrentModelID in
// place); nil stays nil.
func CloneModels(m *protocol.Models) *protocol.Models {
	if m == nil {
		return nil
	}
	c := *m
	return &c
}

// CloneModes copies m for a worker; nil stays nil.
func CloneModes(m *protocol.Modes) *protocol.Modes {
	if m == nil {
		return nil
	}
	c := *m
	return &c
}

// selectOption is an ACP SessionConfigOption of type select; options are
// flat ({value}) or grouped ({options: [{value}]}).
type selectOption struct {
	ID           string `json:"id"`
	Category     string `json:"category"`
	CurrentValue string `json:"currentValue"`
	Options      []struct {
		Value   string `json:"value"`
		Options []struct {
			Value string `json:"value"`
		} `json:"options"`
	} `json:"options"`
}

// selectValues finds the select option (of ACP SessionConfigOptions opts)
// whose id or category is name and returns its current value and every
// value it offers (flat or grouped); ok is false when there is none.
func selectValues(opts []json.RawMessage, name string) (current string, values []string, ok bool) {
	for _, raw := range opts {
		var o selectOption
		if json.Unmarshal(raw, &o) != nil || (o.Category != name && o.ID != name) {
			continue
		}
		values = []string{}
		for _, v := range o.Options {
			if v.Value != "" {
				values = append(values, v.Value)
			}
			for _, g := range v.Options {
				values = append(values, g.Value)
			}
		}
		return o.CurrentValue, values, true
	}
	return "", nil, false
}

// ModelsFromConfig is the model state the config option of category
// "model" reports (an agent without ACP `models`); nil without one.
func ModelsFromConfig(opts []json.RawMessage) *protocol.Models {
	cur, vals, ok := selectValues(opts, "model")
	if !ok {
		return nil
	}
	return &protocol.Models{CurrentModelID: cur, AvailableModelIDs: vals}
}

// ModesFromConfig is the mode state the config option of category "mode"
// reports (an agent without ACP `modes`); nil without one.
func ModesFromConfig(opts []json.RawMessage) *protocol.Modes {
	cur, vals, ok := selectValues(opts, "mode")
	if !ok {
		return nil
	}
	return &protocol.Modes{CurrentModeID: cur, AvailableModeIDs: vals}
}
