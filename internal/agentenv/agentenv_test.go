package agentenv

import (
	"encoding/json"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const testStub = "http://127.0.0.1:4321"

// fakeRepo makes a repository root whose node_modules holds every agent
// package at its pinned version (version overrides one), and a PATH with a
// fake node. It returns the root.
func fakeRepo(t *testing.T, version map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for _, a := range agents {
		pkg := filepath.Join(root, "node_modules", filepath.FromSlash(a.Package))
		v := a.Version
		if o, ok := version[a.Package]; ok {
			v = o
		}
		mustWrite(t, filepath.Join(pkg, "package.json"), `{"name":"`+a.Package+`","version":"`+v+`"}`, 0o644)
		mustWrite(t, filepath.Join(pkg, filepath.FromSlash(a.Entry)), "#!/bin/sh\n", 0o755)
	}
	node := filepath.Join(root, "node_modules", NodePackage)
	mustWrite(t, filepath.Join(node, "package.json"), `{"name":"`+NodePackage+`","version":"`+NodeVersion+`"}`, 0o644)
	mustWrite(t, filepath.Join(node, "bin", "node"), "#!/bin/sh\n", 0o755)
	bin := filepath.Join(root, "fakebin")
	mustWrite(t, filepath.Join(bin, "node"), "#!/bin/sh\n", 0o755)
	t.Setenv("PATH", bin)
	return root
}

func mustWrite(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNamesAndLookup: the nine agents in order, each bound to its sidecar
// profile and key variable.
func TestNamesAndLookup(t *testing.T) {
	want := []string{"codex", "claude", "gemini", "opencode", "codex-legacy", "copilot", "pi", "kimi", "qwen"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for name, w := range map[string][3]string{
		"codex":        {"codex", "@agentclientprotocol/codex-acp", "OPENAI_API_KEY"},
		"codex-legacy": {"codex", "@zed-industries/codex-acp", "OPENAI_API_KEY"},
		"claude":       {"claude", "@agentclientprotocol/claude-agent-acp", "ANTHROPIC_API_KEY"},
		"gemini":       {"gemini", "@google/gemini-cli", "GEMINI_API_KEY"},
		"opencode":     {"opencode", "opencode-ai", "STUB_API_KEY"},
		"copilot":      {"copilot", "@github/copilot", "COPILOT_PROVIDER_API_KEY"},
		"pi":           {"pi", "pi-acp", "STUB_API_KEY"},
		"kimi":         {"kimi", "@moonshot-ai/kimi-code", "KIMI_MODEL_API_KEY"},
		"qwen":         {"qwen", "@qwen-code/qwen-code", "OPENAI_API_KEY"},
	} {
		a, err := Lookup(name)
		if err != nil || a.Name != name || a.Profile != w[0] || a.Package != w[1] || a.KeyEnv != w[2] || a.Version == "" {
			t.Errorf("Lookup(%q) = %+v, %v; want profile %s package %s key %s", name, a, err, w[0], w[1], w[2])
		}
	}
	if _, err := Lookup("codex-acp"); err == nil || !strings.Contains(err.Error(), "codex, claude") {
		t.Errorf("Lookup of an unknown name: %v", err)
	}
	a, _ := Lookup("gemini")
	a.Args[0] = "changed"
	if b, _ := Lookup("gemini"); b.Args[0] != "--acp" {
		t.Errorf("Lookup shares its Args with the caller: %v", b.Args)
	}
}

// TestCheckStubURL: only http://LOOPBACK:PORT, or a name of the reserved
// .test domain (the egress tests pin it with --resolve), is accepted.
func TestCheckStubURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4321":  "http://127.0.0.1:4321",
		"http://127.0.0.1:4321/": "http://127.0.0.1:4321",
		"http://127.9.9.9:1":     "http://127.9.9.9:1",
		"http://[::1]:80":        "http://[::1]:80",
		"http://localhost:8080":  "http://localhost:8080",
		"http://model.test:8080": "http://model.test:8080",
		"http://a.b.test:1":      "http://a.b.test:1",
	} {
		if got, err := checkStubURL(in); err != nil || got != want {
			t.Errorf("checkStubURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", "127.0.0.1:4321", "https://127.0.0.1:4321", "http://127.0.0.1", "http://10.0.0.1:80",
		"http://example.com:80", "http://127.0.0.1:80/v1", "http://127.0.0.1:80?x=1", "http://u:p@127.0.0.1:80",
		"http://127.0.0.1:80#f", `http://127.0.0.1:80/"`, "http://0.0.0.0:80",
		"http://test:80", "http://.test:80", "http://model.test.evil:80", "http://a..test:80", "http://a_b.test:80",
	} {
		if got, err := checkStubURL(in); err == nil {
			t.Errorf("checkStubURL(%q) = %q, want an error", in, got)
		}
	}
}

// TestPrepare_Common: for every agent the command is absolute, the dir
// given is the agent's HOME (0700) with the XDG dirs private directories
// under it, HOME and TMPDIR are left to the sidecar (the key's private
// HOME, a private TMPDIR), the API key is left to the caller and no value
// points anywhere but the stub or dir.
func TestPrepare_Common(t *testing.T) {
	root := fakeRepo(t, nil)
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			l, err := Prepare(name, root, testStub, dir)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := Lookup(name)
			if l.Agent != a.Profile || l.KeyEnv != a.KeyEnv {
				t.Errorf("launch %+v, want profile %s key %s", l, a.Profile, a.KeyEnv)
			}
			entry := filepath.Join(root, "node_modules", a.Package, a.Entry)
			if a.Native {
				if l.Command.Path != entry || !slices.Equal(l.Command.Args, a.Args) {
					t.Errorf("command %+v, want %s %v", l.Command, entry, a.Args)
				}
			} else if node := filepath.Join(root, "fakebin", "node"); a.Node22 {
				node = filepath.Join(root, "node_modules", NodePackage, "bin", "node")
				if l.Command.Path != node || !slices.Equal(l.Command.Args, append([]string{entry}, a.Args...)) {
					t.Errorf("command %+v, want the pinned Node 22 %s %v", l.Command, entry, a.Args)
				}
				if want := filepath.Dir(node) + ":" + os.Getenv("PATH"); l.Env["PATH"] != want {
					t.Errorf("PATH %q, want %q (the pinned node first)", l.Env["PATH"], want)
				}
			} else if l.Command.Path != node || !slices.Equal(l.Command.Args, append([]string{entry}, a.Args...)) {
				t.Errorf("command %+v, want node %s %v", l.Command, entry, a.Args)
			}
			if _, set := l.Env["HOME"]; l.Home != dir || set {
				t.Errorf("Home %q (want %s), HOME in env: %v", l.Home, dir, set)
			}
			if _, set := l.Env["TMPDIR"]; set {
				t.Errorf("TMPDIR set: the sidecar makes a private one")
			}
			if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
				t.Errorf("home %s: %v, want 0700", dir, err)
			}
			for _, k := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"} {
				st, err := os.Stat(l.Env[k])
				if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 || !strings.HasPrefix(l.Env[k], dir+"/") {
					t.Errorf("%s=%q: %v (want a 0700 directory under %s)", k, l.Env[k], err, dir)
				}
			}
			if _, ok := l.Env[l.KeyEnv]; ok {
				t.Errorf("Prepare set the key variable %s", l.KeyEnv)
			}
			for k, v := range l.Env {
				if strings.Contains(v, "://") && v != testStub && v != testStub+"/v1" {
					t.Errorf("%s=%q is a URL other than the stub's", k, v)
				}
				if strings.HasPrefix(v, "/") && v != dir && !strings.HasPrefix(v, dir+"/") && k != "PATH" && !strings.HasPrefix(v, root+"/node_modules/") {
					t.Errorf("%s=%q is a path outside %s and the pinned packages", k, v, dir)
				}
			}
			checkFiles(t, dir)
		})
	}
}

// checkFiles: every file Prepare wrote names no URL but the stub's and no
// permission, approval or mode setting (the sidecar binds those).
func checkFiles(t *testing.T, dir string) {
	t.Helper()
	urls := regexp.MustCompile(`[a-z]+://[^"\s]*`)
	banned := regexp.MustCompile(`(?i)permission|approval|sandbox|yolo|mode\b|INITIAL_AGENT_MODE|allow`)
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		s := readFile(t, path)
		for _, u := range urls.FindAllString(s, -1) {
			if !strings.HasPrefix(u, testStub) {
				t.Errorf("%s names the URL %q", path, u)
			}
		}
		if m := banned.FindString(s); m != "" {
			t.Errorf("%s holds %q: permission settings belong to the sidecar", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPrepare_Codex: codex 2.x gets the loopback provider, the catalog
// model and the quiet settings, top-level keys before any table; the
// legacy adapter gets modelstub.WriteCodexHome's file.
func TestPrepare_Codex(t *testing.T) {
	root := fakeRepo(t, nil)
	dir := t.TempDir()
	l, err := Prepare("codex", root, testStub+"/", dir)
	if err != nil {
		t.Fatal(err)
	}
	if l.Env["CODEX_HOME"] != filepath.Join(l.Home, ".codex") || l.Env["NO_BROWSER"] != "1" {
		t.Errorf("env %v", l.Env)
	}
	cfg := readFile(t, filepath.Join(l.Env["CODEX_HOME"], "config.toml"))
	top, _, _ := strings.Cut(cfg, "\n[")
	for _, want := range []string{`model_provider = "local"`, `model = "gpt-5.5"`, "check_for_update_on_startup = false", `web_search = "disabled"`} {
		if !strings.Contains(top, "\n"+want+"\n") {
			t.Errorf("config.toml lacks top-level %q:\n%s", want, cfg)
		}
	}
	for _, want := range []string{
		"[model_providers.local]\nname = \"local\"\nbase_url = \"http://127.0.0.1:4321/v1\"\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n",
		"[analytics]\nenabled = false\n", "[feedback]\nenabled = false\n",
		"[features]\nplugins = false\nremote_plugin = false\napps = false\nplugin_discovery_prefetch = false\ntool_suggest = false\nshell_snapshot = false\nimage_generation = false\n",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config.toml lacks %q:\n%s", want, cfg)
		}
	}

	legacy := t.TempDir()
	l, err = Prepare("codex-legacy", root, testStub, legacy)
	if err != nil {
		t.Fatal(err)
	}
	cfg = readFile(t, filepath.Join(l.Env["CODEX_HOME"], "config.toml"))
	if !strings.Contains(cfg, `base_url = "http://127.0.0.1:4321/v1"`) || strings.Contains(cfg, "gpt-5.5") {
		t.Errorf("legacy config.toml:\n%s", cfg)
	}
}

// TestPrepare_Claude: the quiet variables, IS_SANDBOX=1 (the root quirk)
// and a private CLAUDE_CONFIG_DIR.
func TestPrepare_Claude(t *testing.T) {
	root := fakeRepo(t, nil)
	dir := t.TempDir()
	l, err := Prepare("claude", root, testStub, dir)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"ANTHROPIC_BASE_URL": testStub, "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
		"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION": "false", "IS_SANDBOX": "1",
		"CLAUDE_CONFIG_DIR": filepath.Join(l.Home, ".claude"),
	} {
		if l.Env[k] != v {
			t.Errorf("%s=%q, want %q", k, l.Env[k], v)
		}
	}
	if st, err := os.Stat(l.Env["CLAUDE_CONFIG_DIR"]); err != nil || !st.IsDir() {
		t.Errorf("CLAUDE_CONFIG_DIR: %v", err)
	}
}

// TestPrepare_Gemini: gateway base URL, trusted workspace, no relaunch and
// the settings file in GEMINI_CLI_HOME/.gemini.
func TestPrepare_Gemini(t *testing.T) {
	root := fakeRepo(t, nil)
	l, err := Prepare("gemini", root, testStub, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"GOOGLE_GEMINI_BASE_URL": testStub, "GEMINI_CLI_TRUST_WORKSPACE": "true",
		"GEMINI_CLI_HOME": l.Home, "GEMINI_CLI_NO_RELAUNCH": "true",
	} {
		if l.Env[k] != v {
			t.Errorf("%s=%q, want %q", k, l.Env[k], v)
		}
	}
	var s struct {
		General   map[string]bool `json:"general"`
		Privacy   map[string]bool `json:"privacy"`
		Telemetry map[string]bool `json:"telemetry"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(l.Home, ".gemini", "settings.json"))), &s); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.General["enableAutoUpdate"]; !ok || v || s.Privacy["usageStatisticsEnabled"] || s.Telemetry["enabled"] ||
		len(s.Telemetry) != 1 {
		t.Errorf("settings %+v", s)
	}
}

// TestPrepare_OpenCode: the config file (key by env substitution, never
// the key itself), the OPENCODE_DISABLE_* switches and the pre-seeded
// plugin folder that keeps it from running npm install.
func TestPrepare_OpenCode(t *testing.T) {
	root := fakeRepo(t, nil)
	dir := t.TempDir()
	l, err := Prepare("opencode", root, testStub, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"MODELS_FETCH", "AUTOUPDATE", "LSP_DOWNLOAD", "DEFAULT_PLUGINS", "SHARE"} {
		if l.Env["OPENCODE_DISABLE_"+k] != "1" {
			t.Errorf("OPENCODE_DISABLE_%s=%q", k, l.Env["OPENCODE_DISABLE_"+k])
		}
	}
	var cfg struct {
		Provider map[string]struct {
			NPM     string `json:"npm"`
			Options struct {
				BaseURL string `json:"baseURL"`
				APIKey  string `json:"apiKey"`
			} `json:"options"`
			Models map[string]struct {
				ToolCall bool `json:"tool_call"`
			} `json:"models"`
		} `json:"provider"`
		Model            string   `json:"model"`
		SmallModel       string   `json:"small_model"`
		Share            string   `json:"share"`
		EnabledProviders []string `json:"enabled_providers"`
		Autoupdate       *bool    `json:"autoupdate"`
	}
	if err := json.Unmarshal([]byte(readFile(t, l.Env["OPENCODE_CONFIG"])), &cfg); err != nil {
		t.Fatal(err)
	}
	p := cfg.Provider["stub"]
	if len(cfg.Provider) != 1 || p.NPM != "@ai-sdk/openai-compatible" || p.Options.BaseURL != testStub+"/v1" ||
		p.Options.APIKey != "{env:STUB_API_KEY}" || !p.Models["stub-model"].ToolCall {
		t.Errorf("provider %+v", cfg.Provider)
	}
	if cfg.Model != "stub/stub-model" || cfg.SmallModel != "stub/stub-model" || cfg.Share != "disabled" || !slices.Equal(cfg.EnabledProviders, []string{"stub"}) ||
		cfg.Autoupdate == nil || *cfg.Autoupdate {
		t.Errorf("config %+v", cfg)
	}
	seed := filepath.Join(l.Env["XDG_CONFIG_HOME"], "opencode")
	if st, err := os.Stat(filepath.Join(seed, "node_modules")); err != nil || !st.IsDir() {
		t.Errorf("seeded node_modules: %v", err)
	}
	if s := readFile(t, filepath.Join(seed, "package.json")); !strings.Contains(s, `"@opencode-ai/plugin": "1.18.33"`) {
		t.Errorf("seeded package.json: %s", s)
	}
	var lock struct {
		LockfileVersion int `json:"lockfileVersion"`
		Packages        map[string]struct {
			Dependencies map[string]string `json:"dependencies"`
		} `json:"packages"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(seed, "package-lock.json"))), &lock); err != nil ||
		lock.LockfileVersion != 3 || lock.Packages[""].Dependencies["@opencode-ai/plugin"] != "1.18.33" {
		t.Errorf("seeded package-lock.json: %+v %v", lock, err)
	}
}

// TestPrepare_Errors: unknown agent, bad stub URL, missing or mismatched
// package, no node.
func TestPrepare_Errors(t *testing.T) {
	root := fakeRepo(t, map[string]string{"@google/gemini-cli": "0.60.0"})
	for _, tc := range []struct{ name, root, url, want string }{
		{"nope", root, testStub, "unknown agent"},
		{"codex", root, "http://192.168.1.1:80", "not loopback"},
		{"gemini", root, testStub, `at "0.60.0", want the pinned 0.61.0`},
		{"claude", t.TempDir(), testStub, "is not installed"},
	} {
		dir := filepath.Join(t.TempDir(), "s")
		l, err := Prepare(tc.name, tc.root, tc.url, dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Prepare(%s, %s): %+v, %v; want an error with %q", tc.name, tc.url, l, err, tc.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("Prepare(%s) made %s despite failing its checks", tc.name, dir)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Prepare("codex", root, testStub, t.TempDir()); err == nil || !strings.Contains(err.Error(), "needs node") {
		t.Errorf("no node: %v", err)
	}
	if _, err := Prepare("opencode", root, testStub, t.TempDir()); err != nil {
		t.Errorf("opencode is native, needs no node: %v", err)
	}
}

// TestPrepare_RealInstall: with this repository's node_modules (when
// `make deps` ran), every agent's entry point exists at its pinned version.
func TestPrepare_RealInstall(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules")); err != nil {
		t.Skip("no node_modules (run `make deps`)")
	}
	for _, name := range Names() {
		l, err := Prepare(name, root, testStub, t.TempDir())
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if st, err := os.Stat(l.Command.Path); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("%s: command %s: %v", name, l.Command.Path, err)
		}
	}
}

// TestKeyHome_IsTheSidecarsPrivateHomeOfTheKey: KeyHome names the
// directory the sidecar's store makes a key's private HOME in.
func TestKeyHome_IsTheSidecarsPrivateHomeOfTheKey(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k", "a key/with üñí"} {
		if got, want := KeyHome(st.Dir(), key), st.HomePath(key); got != want {
			t.Errorf("KeyHome(%q) = %s, the store's %s", key, got, want)
		}
	}
}

// TestPrepare_SeedAgents: copilot, pi, kimi and qwen get the settings of
// AGENTS-OFFLINE-MORE.md: the stub's URL, their homes under HOME, the
// quiet switches, and pi's and qwen's config files.
func TestPrepare_SeedAgents(t *testing.T) {
	root := fakeRepo(t, nil)
	want := map[string]map[string]string{
		"copilot": {"COPILOT_PROVIDER_BASE_URL": testStub + "/v1", "COPILOT_PROVIDER_WIRE_API": "responses", "COPILOT_OFFLINE": "true",
			"COPILOT_HOME": "~/.copilot"},
		"pi": {"PI_CODING_AGENT_DIR": "~/.pi/agent", "PI_OFFLINE": "1", "npm_config_offline": "true", "PI_TELEMETRY": "0",
			"PI_SKIP_VERSION_CHECK": "1"},
		"kimi": {"KIMI_MODEL_BASE_URL": testStub + "/v1", "KIMI_MODEL_PROVIDER_TYPE": "openai_responses", "KIMI_CODE_HOME": "~/.kimi-code",
			"KIMI_DISABLE_TELEMETRY": "1", "KIMI_CODE_NO_AUTO_UPDATE": "1"},
		"qwen": {"OPENAI_BASE_URL": testStub + "/v1", "OPENAI_MODEL": StubModel, "QWEN_HOME": "~/.qwen"},
	}
	for name, env := range want {
		dir := t.TempDir()
		l, err := Prepare(name, root, testStub, dir)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range env {
			if strings.HasPrefix(v, "~/") {
				v = filepath.Join(dir, v[2:]) // dir is the agent's HOME
			}
			if l.Env[k] != v {
				t.Errorf("%s: %s=%q, want %q", name, k, l.Env[k], v)
			}
		}
	}
	dir := t.TempDir()
	l, _ := Prepare("pi", root, testStub, dir)
	models := readFile(t, filepath.Join(l.Env["PI_CODING_AGENT_DIR"], "models.json"))
	if !strings.Contains(models, `"apiKey": "$`+StubKeyEnv+`"`) || !strings.Contains(models, testStub+"/v1") {
		t.Errorf("pi models.json %s: want the stub and the key by reference", models)
	}
	if got := l.Env["PI_ACP_PI_COMMAND"]; got != filepath.Join(root, "node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js") {
		t.Errorf("PI_ACP_PI_COMMAND %q", got)
	}
	dir = t.TempDir()
	l, _ = Prepare("qwen", root, testStub, dir)
	var set map[string]map[string]any
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(l.Env["QWEN_HOME"], "settings.json"))), &set); err != nil ||
		set["privacy"]["usageStatisticsEnabled"] != false || set["memory"]["enableManagedAutoMemory"] != false ||
		set["ui"]["enableFollowupSuggestions"] != false {
		t.Errorf("qwen settings %v: %v", set, err)
	}
	if err := os.RemoveAll(filepath.Join(root, "node_modules", NodePackage)); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare("kimi", root, testStub, t.TempDir()); err == nil || !strings.Contains(err.Error(), "needs Node 22") {
		t.Errorf("kimi without the pinned Node 22: %v", err)
	}
}
