package agentenv

import (
	"fmt"
	"path/filepath"

	"github.com/acpx-sidecar/acpx-sidecar/internal/modelstub"
)

// CodexModel is the model codex 2.x is configured with: a slug of its
// built-in catalog, so no "model metadata not found" warning reaches the
// session as an extra agent chunk.
const CodexModel = "gpt-5.5"

// codexConfig is CODEX_HOME/config.toml for codex 2.x: the loopback
// Responses provider, the catalog model and the quiet settings that stop
// every lookup of chatgpt.com or github.com (docs/agents.md, Codex).
// Top-level keys must precede the tables. The one %s is the provider's base
// URL (checked by checkStubURL, so it needs no TOML escaping). No approval
// or sandbox setting: that is the sidecar's.
const codexConfig = `# Written by agentenv (docs/agents.md, Codex).
model_provider = "local"
model = "` + CodexModel + `"
check_for_update_on_startup = false
web_search = "disabled"

[model_providers.local]
name = "local"
base_url = "%s"
env_key = "OPENAI_API_KEY"
wire_api = "responses"

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false
plugin_discovery_prefetch = false
tool_suggest = false
shell_snapshot = false
image_generation = false
`

// WriteCodexHome writes home/config.toml (0600; home made 0700) for codex
// 2.x (@agentclientprotocol/codex-acp): the model stub at base (its root
// URL, e.g. "http://127.0.0.1:PORT") as the Responses provider, the model
// CodexModel and the quiet settings of docs/agents.md (Codex). Errors: a
// base that is not a loopback http URL, or the file system's.
func WriteCodexHome(home, base string) error {
	b, err := checkStubURL(base)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(home, "config.toml"), fmt.Appendf(nil, codexConfig, b+"/v1"))
}

// prepareCodex sets up @agentclientprotocol/codex-acp 2.x.
func prepareCodex(l *Launch, base string) error {
	home := filepath.Join(l.Home, ".codex") // under HOME: writable in the default sandbox
	if err := WriteCodexHome(home, base); err != nil {
		return err
	}
	l.Env["CODEX_HOME"] = home
	l.Env["NO_BROWSER"] = "1"
	return nil
}

// prepareCodexLegacy sets up @zed-industries/codex-acp 0.16 with the config
// the existing tests and demo use (modelstub.WriteCodexHome).
func prepareCodexLegacy(l *Launch, base string) error {
	home := filepath.Join(l.Home, ".codex") // under HOME: writable in the default sandbox
	if err := modelstub.WriteCodexHome(home, base); err != nil {
		return fmt.Errorf("agentenv: %w", err)
	}
	l.Env["CODEX_HOME"] = home
	l.Env["NO_BROWSER"] = "1"
	return nil
}

// prepareClaude sets up claude-agent-acp: the Anthropic base URL is the
// stub's root (the agent appends /v1/messages), telemetry, error reports,
// auto-update, nonessential traffic and the extra "suggestion" model
// requests are off. IS_SANDBOX=1: as root, any other value makes
// session/new fail ("--dangerously-skip-permissions cannot be used with
// root"); 1 is also harmless for other users. CLAUDE_CONFIG_DIR keeps
// .claude.json and .claude/ in the session's HOME (writable in the
// default sandbox).
func prepareClaude(l *Launch, base string) error {
	for k, v := range map[string]string{
		"ANTHROPIC_BASE_URL":                       base,
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_ERROR_REPORTING":                  "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION":     "false",
		"IS_SANDBOX":                               "1",
		"CLAUDE_CONFIG_DIR":                        filepath.Join(l.Home, ".claude"),
	} {
		l.Env[k] = v
	}
	return mkdirs(l.Env["CLAUDE_CONFIG_DIR"])
}

// geminiSettings is $GEMINI_CLI_HOME/.gemini/settings.json: without it the
// CLI contacts update and usage-statistics hosts (docs/agents.md, Gemini).
var geminiSettings = map[string]any{
	"general":   map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
	"privacy":   map[string]any{"usageStatisticsEnabled": false},
	"telemetry": map[string]any{"enabled": false},
}

// prepareGemini sets up gemini-cli: GOOGLE_GEMINI_BASE_URL selects the
// "gateway" auth type (no authenticate), GEMINI_CLI_HOME (= HOME) holds
// .gemini/, the workspace is trusted without a prompt and the CLI does not
// relaunch itself as a second node process.
func prepareGemini(l *Launch, base string) error {
	l.Env["GOOGLE_GEMINI_BASE_URL"] = base
	l.Env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
	l.Env["GEMINI_CLI_HOME"] = l.Home
	l.Env["GEMINI_CLI_NO_RELAUNCH"] = "true"
	return writeJSON(filepath.Join(l.Home, ".gemini", "settings.json"), geminiSettings)
}

// OpenCodeModel is the model opencode is configured with, "provider/model".
const OpenCodeModel = "stub/stub-model"

// opencodeConfig returns the OPENCODE_CONFIG file's content: one
// openai-compatible provider "stub" at base+"/v1" whose key opencode reads
// from OpenCodeKeyEnv, the only enabled provider, with auto-update and
// sharing off. No "permission" entry: that is the sidecar's.
func opencodeConfig(base string) map[string]any {
	return map[string]any{
		"provider": map[string]any{
			"stub": map[string]any{
				"npm":  "@ai-sdk/openai-compatible",
				"name": "stub",
				"options": map[string]any{
					"baseURL": base + "/v1",
					"apiKey":  "{env:" + OpenCodeKeyEnv + "}",
				},
				"models": map[string]any{
					"stub-model": map[string]any{
						"name":      "Stub",
						"tool_call": true,
						"limit":     map[string]any{"context": 128000, "output": 4096},
					},
				},
			},
		},
		"model":             OpenCodeModel,
		"small_model":       OpenCodeModel,
		"enabled_providers": []string{"stub"},
		"autoupdate":        false,
		"share":             "disabled",
	}
}

// prepareOpenCode sets up `opencode acp`: the config file, the
// OPENCODE_DISABLE_* switches, and $XDG_CONFIG_HOME/opencode pre-seeded as
// if `npm install @opencode-ai/plugin@version` had run there, since
// opencode otherwise runs that install (reaching the npm registry) at every
// start.
func prepareOpenCode(l *Launch, base, version string) error {
	// Under HOME: opencode rewrites its config file at start, and the
	// default sandbox lets it write only its cwd, HOME and TMPDIR.
	cfg := filepath.Join(l.Home, "opencode.json")
	if err := writeJSON(cfg, opencodeConfig(base)); err != nil {
		return err
	}
	l.Env["OPENCODE_CONFIG"] = cfg
	for _, k := range []string{"MODELS_FETCH", "AUTOUPDATE", "LSP_DOWNLOAD", "DEFAULT_PLUGINS", "SHARE"} {
		l.Env["OPENCODE_DISABLE_"+k] = "1"
	}
	seed := filepath.Join(l.Env["XDG_CONFIG_HOME"], "opencode")
	if err := mkdirs(filepath.Join(seed, "node_modules")); err != nil {
		return err
	}
	deps := map[string]any{"dependencies": map[string]string{"@opencode-ai/plugin": version}}
	if err := writeJSON(filepath.Join(seed, "package.json"), deps); err != nil {
		return err
	}
	return writeJSON(filepath.Join(seed, "package-lock.json"), map[string]any{
		"lockfileVersion": 3,
		"packages":        map[string]any{"": deps},
	})
}
