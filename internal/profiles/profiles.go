// Package profiles holds the per-agent rules of acpx-sidecar as data: how
// each ACP agent authenticates, how it is bound to the host's permission
// policy (its asking modes, or launch settings such as OpenCode's
// OPENCODE_PERMISSION), how its model is controlled, and the quirks we know
// about, each with its source (docs/agents.md). A profile never changes
// which executable is launched (the host's command is the only one,
// docs/rules.md#r4); it changes how the sidecar talks to it and, for a
// binding, adds settings to its environment.
package profiles

import (
	"path"
	"sort"
)

// Model-control styles (docs/rules.md#r24).
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
	// MethodID is the ACP auth method id sent in `authenticate`.
	MethodID string
	// EnvVar is the variable that must be set, non-empty, in the launch
	// environment for the rule to apply.
	EnvVar string
}

// Quirk is a known behaviour of an agent that the sidecar accounts for,
// with where it was observed.
type Quirk struct {
	// Text describes the behaviour in one line.
	Text string
	// Source says where it was observed or documented (a docs/agents.md
	// section, a release).
	Source string
}

// Binding says how the sidecar holds an agent to the host's permission
// policy: it starts the agent in a configuration where every tool use the
// agent would otherwise decide alone reaches ACP
// session/request_permission, so permissionMode and permissionPolicy
// decide it (docs/agents.md has the per-agent table).
type Binding struct {
	// AskModes are ACP session mode ids (from `modes`, or the values of the
	// config option of category "mode") in which the agent asks before
	// every tool use it does not keep inside its own read-only bounds,
	// preferred first. With no host `mode`, the sidecar selects the first
	// one the agent offers (unless its current mode is one already) and
	// verifies it. A host `mode` outside this list is one where the agent
	// decides alone. Empty: modes do not bind this agent.
	AskModes []string
	// AutonomousModes are the mode ids known to let the agent decide tool
	// use alone: a host naming one under a policy that needs asking is
	// refused before anything is launched. (A mode outside AskModes that is
	// not listed here is refused after the handshake, once the agent shows
	// it offers it.)
	AutonomousModes []string
	// Env is set in the launch environment over the host's env: settings
	// that make the agent ask whatever its mode (OpenCode's permission
	// rules). Values are JSON or plain strings, never secrets.
	Env map[string]string
	// IsolateEnv is set over the host's env when the policy needs asking:
	// settings that stop the agent from reading permission grants out of
	// the workspace (files in cwd that whoever wrote the repository
	// controls), at the cost of the workspace's other agent settings.
	IsolateEnv map[string]string
	// IsolateMeta is merged into the `_meta` of ACP session/new,
	// session/load and session/resume when the policy needs asking, for the
	// same purpose (claude-agent-acp's `claudeCode.options`). JSON object.
	IsolateMeta string
	// WorkspaceGrants are names of files or directories the agent reads
	// permission grants from, in cwd or any directory above it, that no
	// setting can turn off: when one exists and the policy needs asking,
	// the open is refused before launch.
	WorkspaceGrants []string
	// AskOptions are config options (by id) and the value each must hold
	// for the agent to ask (Copilot: allow_all "off"). With a policy that
	// needs asking the sidecar sets each after session/new, load and
	// resume when the agent reports another value, verifies it, and holds
	// it: a config_option_update that moves it ends the turn as a policy
	// breach (docs/agents.md, "Drift").
	AskOptions map[string]string
	// NeverModes are modes the sidecar never selects nor lets a host
	// select, under any policy (Copilot's autopilot adds model turns the
	// host never sent): refused MODE_UNAVAILABLE with NeverWhy.
	NeverModes []string
	// NeverWhy says why NeverModes are refused.
	NeverWhy string
	// CannotAsk, when set, says why the agent cannot be made to ask at all
	// (pi runs every tool without asking): an open whose policy needs
	// asking is refused PERMISSION_POLICY_UNENFORCEABLE before anything is
	// launched.
	CannotAsk string
	// Source is where the binding's behaviour was observed or documented.
	Source string
}

// Bound reports whether the profile has any binding (modes or env).
func (b Binding) Bound() bool { return len(b.AskModes) > 0 || len(b.Env) > 0 }

// Never reports whether mode is one of NeverModes.
func (b Binding) Never(mode string) bool {
	for _, m := range b.NeverModes {
		if m == mode {
			return true
		}
	}
	return false
}

// Autonomous reports whether mode is one of AutonomousModes.
func (b Binding) Autonomous(mode string) bool {
	for _, m := range b.AutonomousModes {
		if m == mode {
			return true
		}
	}
	return false
}

// Asks reports whether the agent asks in mode: mode is one of AskModes,
// or the profile is bound by Env alone (then every mode asks).
func (b Binding) Asks(mode string) bool {
	if len(b.AskModes) == 0 {
		return len(b.Env) > 0
	}
	for _, m := range b.AskModes {
		if m == mode {
			return true
		}
	}
	return false
}

// Profile describes one agent family.
type Profile struct {
	// Name is the profile name hosts pass as `agent` (docs/protocol.md §8
	// session/open).
	Name string
	// Title is a human name.
	Title string
	// Auth rules, tried in order; the first whose EnvVar is set and whose
	// MethodID the agent advertises is used.
	Auth []AuthRule
	// ModelControl is ModelControlConfigOption or ModelControlLegacy: the
	// style this agent needs in practice, as documented in docs/agents.md.
	// It is descriptive: the sidecar chooses per request by what the agent
	// offers (its model config option first, session/set_model only
	// without one; internal/controls/models.go) and records the style used.
	ModelControl string
	// Binding holds the agent to the host's permission policy; the zero
	// Binding (generic) binds nothing and is reported as unbound.
	Binding Binding
	// Quirks are known behaviours, with sources.
	Quirks []Quirk
	// StateDirs are where the agent keeps the state it needs to resume its
	// own session in a new process, published and restored by name
	// (docs/protocol.md §24; docs/agents.md keeps the table). An open's
	// stateDirs replace them.
	StateDirs []StateDir
	// NoRetire, when set, says why the agent's tree must not be retired
	// between turns although it advertises session/load or resume: an
	// open with lifecycle per-turn or idleRetireMs is refused
	// CAPABILITY_UNSUPPORTED before anything is launched.
	NoRetire string
	// EffortOption and ThinkingOption name the config option (by id, else
	// by category) that session/open `effort` and `thinking` are applied
	// through and verified against (docs/protocol.md §24, effort and
	// thinking). "" is the default: for effort the option with id
	// "effort", for thinking the option of category "thought_level". "-"
	// means the agent has none: the open is refused CONTROL_UNAVAILABLE
	// before anything is launched.
	EffortOption, ThinkingOption string
	// SlashGuard: a prompt whose text starts with "/" is a command of the
	// agent's own (Copilot's /allow-all, /autopilot, /permissions…) and is
	// refused unless the open says allowSlashCommands (docs/agents.md,
	// Copilot).
	SlashGuard bool
	// UsageReceipt is the extension notification method on which the
	// agent reports a turn's usage and cost (Grok's
	// _x.ai/session_notification of sessionUpdate "turn_completed"),
	// accepted only live, within the turn, once (docs/protocol.md §24).
	UsageReceipt string
	// Rewrites are files in a provider-state directory that hold absolute
	// paths into a provider-state directory (pi-acp's session map): after
	// a restore moved the directories, each path that no longer exists is
	// rewritten to the same file in its directory's new place.
	Rewrites []PathRewrite
	// NotRunHere, when set, says the profile comes from the agent's
	// documented ACP surface and was never run by this project's tests.
	NotRunHere string
}

// PathRewrite is a JSON file, File relative to the provider-state
// directory named State, whose string members at Members (a path of
// object keys; "*" matches every key) are absolute paths of files inside
// the provider-state directory named Into.
type PathRewrite struct {
	// State is the name of the provider-state directory holding File.
	State string
	// File is the JSON file's path relative to State's directory, with
	// "/" separators.
	File string
	// Members is the path of object keys to the string members
	// rewritten, outermost first; "*" matches every key at its level.
	Members []string
	// Into is the name of the provider-state directory the paths point
	// into.
	Into string
}

// StateDir is one provider-state location, resolved in the session's
// launch environment: Env's value joined with Sub; when Env is unset or
// empty, $HOME joined with Home ("" Home: then nothing). Skipped when
// UnlessEnv is set to a non-empty value (a variable that moves this
// location into another StateDir).
type StateDir struct {
	// Name is the location's source name in the state store (for
	// example "codex-home").
	Name string
	// Env is the variable naming the location's base directory; "":
	// only Home applies.
	Env string
	// Sub is joined onto Env's value; "": Env's value itself.
	Sub string
	// Home is the location relative to $HOME, used when Env is unset or
	// empty; "": none then.
	Home string
	// UnlessEnv is a variable that, set non-empty, makes this location
	// resolve to nothing; "": never skipped.
	UnlessEnv string
	// Leave are path.Match patterns, relative to the directory, of what
	// is not published: caches the agent rebuilds that would not work in
	// another place.
	Leave []string
}

// Resolve returns the absolute path sd names in the environment getenv
// reads, or "" when it names none (or only a relative path).
func (sd StateDir) Resolve(getenv func(string) string) string {
	if sd.UnlessEnv != "" && getenv(sd.UnlessEnv) != "" {
		return ""
	}
	var p string
	switch {
	case sd.Env != "" && getenv(sd.Env) != "":
		p = joinPath(getenv(sd.Env), sd.Sub)
	case sd.Home != "" && getenv("HOME") != "":
		p = joinPath(getenv("HOME"), sd.Home)
	}
	if p == "" || p[0] != '/' {
		return ""
	}
	return p
}

func joinPath(dir, sub string) string {
	if sub == "" {
		return dir
	}
	return path.Clean(dir + "/" + sub)
}

// OpenCodePermission is the OPENCODE_PERMISSION value of the opencode
// binding: every permission OpenCode knows is "ask" ("*" covers the ones
// added later). OpenCode merges this variable over every config file it
// reads (opencode-ai 1.18.33, config loader; docs/agents.md).
const OpenCodePermission = `{"*":"ask","bash":"ask","edit":"ask","read":"ask","glob":"ask","grep":"ask","list":"ask",` +
	`"webfetch":"ask","websearch":"ask","codesearch":"ask","task":"ask","skill":"ask","lsp":"ask","todowrite":"ask",` +
	`"external_directory":"ask","doom_loop":"ask"}`

var all = map[string]Profile{
	"codex": {
		Name: "codex", Title: "Codex (@agentclientprotocol/codex-acp 2.x; @zed-industries/codex-acp 0.16 as legacy)",
		Auth: []AuthRule{{MethodID: "openai-api-key", EnvVar: "OPENAI_API_KEY"},
			{MethodID: "codex-api-key", EnvVar: "CODEX_API_KEY"}},
		ModelControl: ModelControlConfigOption,
		Binding: Binding{AskModes: []string{"read-only"},
			AutonomousModes: []string{"workspace-write", "agent", "agent-full-access", "auto", "full-access"},
			// codex-acp 2.x marks every session root trusted, so the
			// workspace's .codex/ (rules, config) always applies.
			WorkspaceGrants: []string{".codex"},
			Source: "codex-acp 2.6.0 AgentMode: read-only = approval on-request to the user, read-only sandbox; " +
				"workspace-write edits the workspace unasked, agent sends approvals to Codex's automatic reviewer, " +
				"agent-full-access never asks; 0.16.0 offers read-only, auto, full-access (docs/agents.md)"},
		Quirks: []Quirk{
			{Text: "0.16.0: session/new fails with -32000 Authentication required until authenticate is sent", Source: "docs/agents.md (codex-legacy)"},
			{Text: "2.x: the default mode agent sends approvals to Codex's own model-backed reviewer, never to the client", Source: "docs/agents.md (codex)"},
			{Text: "2.x: model ids carry the reasoning effort, e.g. gpt-5.5[medium]", Source: "docs/agents.md (codex)"},
			{Text: "tool commands run under setsid (own session and process group): group kill leaks them", Source: "docs/agents.md (process trees)"},
			{Text: "advertises loadSession and sessionCapabilities resume and close", Source: "docs/agents.md"},
		},
		// Rollouts under $CODEX_HOME/sessions/ (docs/agents.md). Its
		// state database (state_5.sqlite in codex 0.166) records each
		// rollout's absolute path: restored under another CODEX_HOME it
		// makes session/resume fail, while without it codex rebuilds it
		// from the rollouts, so it is left out.
		StateDirs: []StateDir{{Name: "codex-home", Env: "CODEX_HOME", Home: ".codex",
			Leave: []string{"state_*.sqlite", "state_*.sqlite-*"}}},
	},
	"claude": {
		Name: "claude", Title: "Claude (@agentclientprotocol/claude-agent-acp)",
		Auth:         []AuthRule{{MethodID: "anthropic-api-key", EnvVar: "ANTHROPIC_API_KEY"}},
		ModelControl: ModelControlConfigOption,
		Binding: Binding{AskModes: []string{"default"},
			AutonomousModes: []string{"acceptEdits", "plan", "auto", "bypassPermissions", "dontAsk"},
			// Only the user's settings: the workspace's .claude/settings*.json
			// can allow tools without asking.
			IsolateMeta: `{"claudeCode":{"options":{"settingSources":["user"]}}}`,
			Source: "claude-agent-acp 0.101.0 session modes: default = always ask before changes; auto (its default) " +
				"decides with a model-backed classifier; acceptEdits edits unasked; bypassPermissions never asks (docs/agents.md)"},
		Quirks: []Quirk{
			{Text: "sends no models field: the model is the config option of category model", Source: "docs/agents.md (claude)"},
			{Text: "advertises no auth methods; reads ANTHROPIC_API_KEY from its environment", Source: "docs/agents.md (claude)"},
			{Text: "a resumed session restores the permission mode of its transcript: the binding is re-applied after load/resume", Source: "claude-agent-acp 0.101.0 session-mode.js"},
		},
		// Transcripts under $CLAUDE_CONFIG_DIR/projects/<cwd slug>/;
		// CLAUDE_CONFIG_DIR also moves .claude.json into it.
		StateDirs: []StateDir{{Name: "claude-config", Env: "CLAUDE_CONFIG_DIR", Home: ".claude"},
			{Name: "claude.json", Home: ".claude.json", UnlessEnv: "CLAUDE_CONFIG_DIR"}},
	},
	"gemini": {
		Name: "gemini", Title: "Gemini CLI (gemini --acp)",
		Auth:         []AuthRule{{MethodID: "gemini-api-key", EnvVar: "GEMINI_API_KEY"}},
		ModelControl: ModelControlLegacy,
		Binding: Binding{AskModes: []string{"default"},
			AutonomousModes: []string{"autoEdit", "yolo", "plan"},
			// An untrusted workspace's .gemini/settings.json is ignored.
			IsolateEnv: map[string]string{"GEMINI_CLI_TRUST_WORKSPACE": "false"},
			Source:     "gemini-cli 0.61.0 modes: default asks before tools that change anything; autoEdit edits unasked; yolo never asks (docs/agents.md)"},
		Quirks: []Quirk{
			{Text: "ACP mode is the --acp flag; the host passes it in command.args", Source: "docs/agents.md (gemini)"},
			{Text: "offers models but no config options: the model is set with session/set_model", Source: "docs/agents.md (gemini)"},
			{Text: "sends no tool_call before its permission request", Source: "docs/agents.md (gemini)"},
			{Text: "0.61.0 names a chat file by the minute of its first turn; a session/load in that minute empties it and fails", Source: "docs/agents.md (gemini)"},
		},
		StateDirs: []StateDir{{Name: "gemini", Env: "GEMINI_CLI_HOME", Sub: ".gemini", Home: ".gemini"}},
		NoRetire: "gemini-cli 0.61.0 names a session's chat file by the minute of its first turn, and a session/load " +
			"in that minute empties the file and fails (docs/agents.md): a tree retired after a turn could not be revived",
	},
	"opencode": {
		Name: "opencode", Title: "OpenCode (opencode acp)",
		ModelControl: ModelControlConfigOption,
		Binding: Binding{Env: map[string]string{"OPENCODE_PERMISSION": OpenCodePermission},
			// Project opencode.json can grant agent-level permissions that
			// OPENCODE_PERMISSION does not override.
			IsolateEnv: map[string]string{"OPENCODE_DISABLE_PROJECT_CONFIG": "1"},
			Source: "opencode-ai 1.18.33 runs bash and edits without asking unless its permission rules say ask; " +
				"OPENCODE_PERMISSION is merged over its config files (docs/agents.md)"},
		Quirks: []Quirk{
			{Text: "ACP is served by the `acp` subcommand; the host passes it in command.args", Source: "docs/agents.md (opencode)"},
			{Text: "sends neither models nor modes: model and mode are config options (categories model, mode)", Source: "docs/agents.md (opencode)"},
		},
		// An SQLite database (with -wal and -shm) under
		// $XDG_DATA_HOME/opencode: archived only once the tree is gone.
		StateDirs: []StateDir{{Name: "opencode-data", Env: "XDG_DATA_HOME", Sub: "opencode", Home: ".local/share/opencode"}},
	},
	"generic": {
		Name: "generic", Title: "Any ACP agent",
		ModelControl: ModelControlConfigOption,
		// An unknown agent's state is wherever it wrote it: its HOME.
		StateDirs: []StateDir{{Name: "home", Env: "HOME"}},
	},
}

// Lookup returns the profile named name; ok is false for unknown names
// (the sidecar then refuses the open with UNKNOWN_AGENT, docs/rules.md#r13).
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
