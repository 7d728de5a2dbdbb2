package profiles

// The agents of the seed (docs/agents.md; PROTOCOL §10.5): Copilot, Pi,
// Kimi Code and Qwen Code, run offline by this project's tests; Grok and
// Cursor from their documented ACP surface, not run here.

// Copilot's session modes are URLs (@github/copilot 1.0.102).
const (
	CopilotAgentMode     = "https://agentclientprotocol.com/protocol/session-modes#agent"
	CopilotPlanMode      = "https://agentclientprotocol.com/protocol/session-modes#plan"
	CopilotAutopilotMode = "https://agentclientprotocol.com/protocol/session-modes#autopilot"
)

// UsageReceiptGrok is Grok's extension notification carrying a turn's
// usage (sessionUpdate "turn_completed"; xai-org/grok-build
// extensions/notification.rs).
const UsageReceiptGrok = "_x.ai/session_notification"

func init() {
	for _, p := range seedProfiles {
		all[p.Name] = p
	}
}

var seedProfiles = []Profile{
	{
		Name: "copilot", Title: "GitHub Copilot CLI (copilot --acp --stdio)",
		ModelControl: ModelControlConfigOption,
		Binding: Binding{AskModes: []string{CopilotAgentMode},
			AutonomousModes: []string{CopilotAutopilotMode},
			AskOptions:      map[string]string{"allow_all": "off"},
			NeverModes:      []string{CopilotAutopilotMode},
			NeverWhy: "Copilot's autopilot runs tools unasked and adds up to five model turns per prompt " +
				"that the host never sent (docs/agents.md, Copilot)",
			Source: "@github/copilot 1.0.102: mode #agent with allow_all off asks before shell commands; allow_all on " +
				"and mode #autopilot never ask (AGENTS-OFFLINE-MORE.md; docs/agents.md)"},
		Quirks: []Quirk{
			{Text: "mode ids are URLs (…/session-modes#agent, #plan, #autopilot); config options mode and allow_all", Source: "docs/agents.md (copilot)"},
			{Text: "with a BYOK provider it offers no model, reasoning_effort or agent options and no models field", Source: "docs/agents.md (copilot)"},
			{Text: "a prompt starting with / runs Copilot's own commands (/allow-all, /autopilot, /permissions)", Source: "docs/agents.md (copilot)"},
			{Text: "its first start extracts 235 MB into $XDG_CACHE_HOME/copilot/pkg", Source: "docs/agents.md (copilot)"},
		},
		EffortOption: "reasoning_effort", ThinkingOption: "-",
		SlashGuard: true,
		StateDirs:  []StateDir{{Name: "copilot-home", Env: "COPILOT_HOME", Home: ".copilot", Leave: []string{"logs"}}},
	},
	{
		Name: "pi", Title: "Pi (pi-acp driving @earendil-works/pi-coding-agent)",
		ModelControl: ModelControlConfigOption,
		Binding: Binding{CannotAsk: "pi runs every tool without asking (pi docs/security.md); pi-acp sends " +
			"permission requests only for pi extension dialogs",
			Source: "pi-acp 0.0.34 with @earendil-works/pi-coding-agent 1.6.0 (docs/agents.md, Pi)"},
		Quirks: []Quirk{
			{Text: "its ACP modes are pi's thinking levels, not permission modes", Source: "docs/agents.md (pi)"},
			{Text: "pi-acp runs `pi --version` and `npm view` at every session/new unless npm_config_offline is set", Source: "docs/agents.md (pi)"},
			{Text: "no session/close and no session/resume: load only", Source: "docs/agents.md (pi)"},
		},
		EffortOption: "-", ThinkingOption: "thought_level",
		// pi's sessions under $PI_CODING_AGENT_DIR/sessions/; pi-acp's
		// session map in $HOME/.pi/pi-acp names each session file by its
		// absolute path.
		StateDirs: []StateDir{{Name: "pi-agent", Env: "PI_CODING_AGENT_DIR", Home: ".pi/agent"},
			{Name: "pi-acp", Home: ".pi/pi-acp"}},
		Rewrites: []PathRewrite{{State: "pi-acp", File: "session-map.json", Members: []string{"sessions", "*", "sessionFile"}, Into: "pi-agent"}},
	},
	{
		Name: "kimi", Title: "Kimi Code (kimi acp)",
		ModelControl: ModelControlConfigOption,
		Binding: Binding{AskModes: []string{"default"},
			AutonomousModes: []string{"auto", "yolo"},
			// Its project-local .kimi-code/ (local.toml) is read from the
			// workspace; no setting was found to turn it off.
			WorkspaceGrants: []string{".kimi-code"},
			Source: "@moonshot-ai/kimi-code 2.1.0: default (Manual approvals) asks before Bash; auto approves what its own " +
				"check calls safe; yolo never asks (docs/agents.md, Kimi)"},
		Quirks: []Quirk{
			{Text: "a <system-reminder> user message follows the first prompt; session/load replays it as a user_message_chunk", Source: "docs/agents.md (kimi)"},
			{Text: "on openai_responses it retries without end when argument deltas do not add up", Source: "docs/agents.md (kimi)"},
		},
		EffortOption: "-", ThinkingOption: "thinking",
		StateDirs: []StateDir{{Name: "kimi-home", Env: "KIMI_CODE_HOME", Home: ".kimi-code", Leave: []string{"logs", "cache"}}},
	},
	{
		Name: "qwen", Title: "Qwen Code (qwen --acp)",
		ModelControl: ModelControlConfigOption,
		Binding: Binding{AskModes: []string{"default"},
			AutonomousModes: []string{"auto", "auto-edit", "yolo"},
			// The workspace's .qwen/settings.json can set the approval mode
			// and tool allow rules.
			WorkspaceGrants: []string{".qwen"},
			Source: "@qwen-code/qwen-code 0.24.4: default asks before shell commands and edits; its default auto asks an " +
				"LLM classifier; auto-edit edits unasked; yolo never asks (docs/agents.md, Qwen)"},
		Quirks: []Quirk{
			{Text: "its default mode auto decides tool use with a model call", Source: "docs/agents.md (qwen)"},
			{Text: "mid-turn stdin EOF answers the pending prompt stopReason cancelled first", Source: "docs/agents.md (qwen)"},
			{Text: "after a tool it sends the client craft/drainMidTurnQueue; method-not-found is fine", Source: "docs/agents.md (qwen)"},
		},
		EffortOption: "-", ThinkingOption: "-",
		StateDirs: []StateDir{{Name: "qwen-home", Env: "QWEN_HOME", Home: ".qwen", Leave: []string{"tmp"}}},
	},
	{
		Name: "grok", Title: "Grok Build (grok agent stdio)",
		ModelControl: ModelControlConfigOption,
		Binding: Binding{AskModes: []string{"default"},
			AutonomousModes: []string{"acceptEdits", "auto", "dontAsk", "bypassPermissions", "plan"},
			// Project .grok/config.toml and Claude-compatible
			// .claude/settings.json can set the permission mode and allow
			// rules.
			WorkspaceGrants: []string{".grok", ".claude"},
			Source: "Grok Build docs, permissions-and-safety: default (ask) runs read-only tools unasked; acceptEdits, auto, " +
				"dontAsk and bypassPermissions (always-approve) do not ask the client"},
		Quirks: []Quirk{
			{Text: "_meta.yoloMode on session/new means always-approve: never sent by the sidecar", Source: "Grok Build docs, agent mode"},
			{Text: "usage of a whole prompt arrives on _x.ai/session_notification turn_completed", Source: "xai-org/grok-build extensions/notification.rs"},
		},
		UsageReceipt: UsageReceiptGrok,
		StateDirs:    []StateDir{{Name: "grok-home", Env: "GROK_HOME", Home: ".grok"}},
		NotRunHere:   "Grok Build is not installable from the registries this project reaches",
	},
	{
		Name: "cursor", Title: "Cursor CLI (cursor-agent acp)",
		ModelControl: ModelControlConfigOption,
		Binding: Binding{AskModes: []string{"agent", "ask", "plan"},
			// The project's .cursor/cli.json holds permission rules.
			WorkspaceGrants: []string{".cursor"},
			Source:          "Cursor docs, cli/acp: modes agent (tools ask through session/request_permission), plan and ask (read-only)"},
		Quirks: []Quirk{
			{Text: "advertises the cursor_login auth method; CURSOR_API_KEY in the environment authenticates", Source: "Cursor docs, cli/acp"},
		},
		StateDirs:  []StateDir{{Name: "cursor-home", Home: ".cursor"}},
		NotRunHere: "Cursor CLI is not installable from the registries this project reaches",
	},
}
