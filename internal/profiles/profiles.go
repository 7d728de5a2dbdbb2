// Package profiles holds the per-agent rules of acpx-sidecar as data: how
// each ACP agent authenticates, how its model is controlled, and the quirks
// we know about, each with its source. A profile never changes what is
// launched (the host's command is the only executable, SEED-BEHAVIOR 4); it
// changes how the sidecar talks to it.
package profiles

import "sort"

// Model-control styles (SEED-BEHAVIOR 24).
const (
	// ModelControlConfigOption: ACP session/set_config_option with the
	// option whose category/id is "model", falling back to the legacy
	// method when the agent has no such option.
	ModelControlConfigOption = "config_option"
	// ModelControlLegacy: the unstable ACP session/set_model method.
	ModelControlLegacy = "legacy_set_model"
)

// AuthRule: send ACP `authenticate {methodId}` when the launch env holds
// EnvVar and the agent advertises MethodID.
type AuthRule struct {
	MethodID string
	EnvVar   string
}

// Quirk is a known behaviour of an agent that the sidecar accounts for,
// with where it was observed.
type Quirk struct {
	Text   string
	Source string
}

// Profile describes one agent family.
type Profile struct {
	// Name is the profile name hosts pass as `agent` (PROTOCOL §4).
	Name string
	// Title is a human name.
	Title string
	// Auth rules, tried in order; the first whose EnvVar is set and whose
	// MethodID the agent advertises is used.
	Auth []AuthRule
	// ModelControl is ModelControlConfigOption or ModelControlLegacy.
	ModelControl string
	// Quirks are known behaviours, with sources.
	Quirks []Quirk
}

var all = map[string]Profile{
	"codex": {
		Name: "codex", Title: "Codex (codex-acp)",
		Auth: []AuthRule{{MethodID: "openai-api-key", EnvVar: "OPENAI_API_KEY"},
			{MethodID: "codex-api-key", EnvVar: "CODEX_API_KEY"}},
		ModelControl: ModelControlConfigOption,
		Quirks: []Quirk{
			{Text: "session/new fails with -32000 Authentication required until authenticate is sent", Source: "CODEX-OFFLINE.md Handshake"},
			{Text: "node_modules/.bin/codex-acp is a node launcher that spawns the Rust binary: two processes", Source: "CODEX-OFFLINE.md Install"},
			{Text: "tool commands run under setsid (own session and process group): group kill leaks them", Source: "CODEX-OFFLINE.md The process tree"},
			{Text: "advertises sessionCapabilities list, resume and close; loadSession true", Source: "CODEX-OFFLINE.md Handshake"},
		},
	},
	"claude": {
		Name: "claude", Title: "Claude (claude-agent-acp)",
		Auth:         []AuthRule{{MethodID: "anthropic-api-key", EnvVar: "ANTHROPIC_API_KEY"}},
		ModelControl: ModelControlConfigOption,
		Quirks: []Quirk{
			{Text: "model selection through the unstable session/set_model in older releases", Source: "ACP schema (unstable session/set_model)"},
			{Text: "reads ANTHROPIC_API_KEY from its environment; the auth method id above is not verified here and is used only when the agent advertises it", Source: "not observed on this machine (no network model for Claude)"},
		},
	},
	"gemini": {
		Name: "gemini", Title: "Gemini CLI (gemini --experimental-acp)",
		Auth:         []AuthRule{{MethodID: "gemini-api-key", EnvVar: "GEMINI_API_KEY"}},
		ModelControl: ModelControlLegacy,
		Quirks: []Quirk{
			{Text: "ACP mode is behind the --experimental-acp flag; the host passes it in command.args", Source: "gemini-cli README"},
			{Text: "the auth method id above is not verified here and is used only when the agent advertises it", Source: "not observed on this machine"},
		},
	},
	"opencode": {
		Name: "opencode", Title: "OpenCode (opencode acp)",
		ModelControl: ModelControlConfigOption,
		Quirks: []Quirk{
			{Text: "ACP is served by the `acp` subcommand; the host passes it in command.args", Source: "opencode docs"},
		},
	},
	"generic": {
		Name: "generic", Title: "Any ACP agent",
		ModelControl: ModelControlConfigOption,
	},
}

// Lookup returns the profile named name; ok is false for unknown names
// (the sidecar then refuses the open with UNKNOWN_AGENT, SEED-BEHAVIOR 13).
func Lookup(name string) (Profile, bool) {
	p, ok := all[name]
	return p, ok
}

// Names returns every profile name, sorted with "generic" last, as
// reported in initialize.capabilities.agents.
func Names() []string {
	names := make([]string, 0, len(all))
	for n := range all {
		if n != "generic" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return append(names, "generic")
}
