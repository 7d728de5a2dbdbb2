// Command demohost is a small, readable demo host for acpx-sidecar. It
// starts the loopback model stub, spawns the sidecar and drives one real
// ACP agent session over the host protocol (docs/protocol.md) through the
// public Go client package (github.com/acpx-sidecar/acpx-sidecar/client):
// initialize, session/open, session/prompt (a turn in which the agent runs
// a shell command through a tool call), session/status, session/close
// (printing the cleanup proof), shutdown and exit. The job is the same for
// every agent internal/agentenv knows: codex (the default,
// @agentclientprotocol/codex-acp 2.6.0), claude, gemini, opencode and
// codex-legacy (@zed-industries/codex-acp 0.16.0).
//
// Usage, from the repository root (`make demo [AGENT=NAME]` does all of it):
//
//	make deps
//	go build -o bin/acpx-sidecar ./cmd/acpx-sidecar
//	go build -o bin/modelstub ./examples/modelstub
//	go run ./examples/demohost [--agent NAME] [--repo-root DIR] [--sidecar PATH]
//	                           [--modelstub PATH] [--command PATH]
//
// --repo-root is the directory whose node_modules holds the pinned agents;
// --command replaces the agent's launcher (the agent's own arguments, such
// as gemini's --acp, still follow it); --codex PATH is the old name of
// --command.
//
// Everything it makes (workspace, state dir, the agent's private HOME and
// config, logs) lives in one temporary directory that is removed at the
// end. It exits 0 when every step succeeded, the agent created made.txt
// and the cleanup proof is complete; 1 otherwise (with a FAILED line
// saying why); 2 on bad flags. Each step is bounded by 120 s. The API key
// it invents is never printed.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/agentenv"
)

// stepTimeout bounds every step that waits on another process.
const stepTimeout = 120 * time.Second

// stepContext bounds one step's requests to the sidecar.
func stepContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), stepTimeout)
}

const (
	sessionKey = "demo-1"
	requestID  = "turn-1"
)

// promptFor is the demo's one prompt: the loopback model answers its
// `run:` line with a shell tool call.
func promptFor(agent string) string {
	return "Please create a file.\nrun: echo hello from " + agent + " > made.txt"
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	d, code := parseFlags(args, stdout, stderr)
	if d == nil {
		return code
	}
	err := d.steps()
	if err != nil {
		d.out.line("")
		d.out.line("FAILED: %v", err)
		d.showLogTail("sidecar log", d.sidecarLog)
	}
	d.cleanup()
	if err == nil && d.out.leaked {
		err = errors.New("the API key appeared in the sidecar's output (redacted above)")
		d.out.line("FAILED: %v", err)
	}
	if err != nil {
		return 1
	}
	d.out.line("")
	d.out.line("demo finished OK (%s)", d.agent.Name)
	return 0
}

// parseFlags builds the demo from the command line; on a bad command line
// it returns nil and the exit status 2.
func parseFlags(args []string, stdout, stderr io.Writer) (*demo, int) {
	fs := flag.NewFlagSet("demohost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agent := fs.String("agent", "codex", "agent to run: "+strings.Join(agentenv.Names(), ", "))
	repoRoot := fs.String("repo-root", ".", "directory whose node_modules holds the pinned agents")
	sidecar := fs.String("sidecar", "bin/acpx-sidecar", "path of the acpx-sidecar binary")
	stub := fs.String("modelstub", "bin/modelstub", "path of the loopback model stub binary")
	override := fs.String("command", "", "launch this executable instead of the agent's own launcher")
	codex := fs.String("codex", "", "old name of --command")
	if err := fs.Parse(args); err != nil {
		return nil, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demohost: unexpected argument %q\n", fs.Arg(0))
		return nil, 2
	}
	a, err := agentenv.Lookup(*agent)
	if err != nil {
		fmt.Fprintf(stderr, "demohost: --agent: %v\n", err)
		return nil, 2
	}
	if *codex != "" {
		if *override != "" && *override != *codex {
			fmt.Fprintln(stderr, "demohost: --codex and --command disagree; give one")
			return nil, 2
		}
		*override = *codex
	}
	d := &demo{out: &printer{w: stdout}, agent: a}
	for _, p := range []struct {
		dst  *string
		flag string
		val  string
	}{{&d.sidecarPath, "--sidecar", *sidecar}, {&d.stubPath, "--modelstub", *stub},
		{&d.repoRoot, "--repo-root", *repoRoot}, {&d.override, "--command", *override}} {
		if p.val == "" {
			continue
		}
		abs, err := filepath.Abs(p.val)
		if err != nil {
			fmt.Fprintf(stderr, "demohost: %s: %v\n", p.flag, err)
			return nil, 2
		}
		*p.dst = abs
	}
	return d, 0
}

// demo holds everything one run starts or makes, so cleanup can undo it.
type demo struct {
	out                   *printer
	agent                 agentenv.Agent
	sidecarPath, stubPath string
	repoRoot, override    string // override: --command, or ""

	tmp, workspace, stateDir, agentHome string
	sidecarLog, stubLog                 string
	apiKey, mark                        string
	launch                              *agentenv.Launch

	stub      *exec.Cmd
	stubStdin io.WriteCloser
	stubDone  chan error

	c       *client.Client  // the sidecar, through the public client package
	logFile *os.File        // the sidecar's stderr; open until it has exited
	session *client.Session // the session of step 3
	proof   *client.Proof   // the cleanup proof of step 7
}

func (d *demo) steps() error {
	for _, s := range []struct {
		title string
		fn    func() error
	}{
		{"0. prepare a temporary workspace", d.prepare},
		{"1. start the loopback model and prepare the agent's environment", d.startModel},
		{"2. start the sidecar and initialize", d.startSidecar},
		{"3. open the session (agent " + d.agent.Name + ")", d.openSession},
		{"4. run one prompt", d.prompt},
		{"5. check the file the agent made", d.checkFile},
		{"6. ask for the session status", d.status},
		{"7. close the session: the cleanup proof", d.closeSession},
		{"8. shut the sidecar down", d.shutdown},
		{"9. double-check: nothing we started is left", d.checkNoLeftovers},
	} {
		d.out.header("%s", s.title)
		if err := s.fn(); err != nil {
			return fmt.Errorf("step %q: %w", s.title, err)
		}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (d *demo) prepare() error {
	bins := []struct{ name, path string }{{"sidecar", d.sidecarPath}, {"modelstub", d.stubPath}}
	if d.override != "" {
		bins = append(bins, struct{ name, path string }{d.agent.Name, d.override})
	}
	for _, p := range bins {
		st, err := os.Stat(p.path)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("%s binary %s is missing or not executable (build it first, see `go doc ./examples/demohost`)", p.name, p.path)
		}
		d.out.line("%-10s %s", p.name, p.path)
	}
	d.out.line("agent      %s: %s %s, sidecar profile %q", d.agent.Name, d.agent.Package, d.agent.Version, d.agent.Profile)
	tmp, err := os.MkdirTemp("", "acpx-demo-")
	if err != nil {
		return err
	}
	d.tmp = tmp
	d.workspace = filepath.Join(tmp, "workspace")
	d.stateDir = filepath.Join(tmp, "state")
	// The agent's HOME is the session key's private one, which the sidecar
	// gives an agent whose open names no HOME (docs/protocol.md §19): its
	// config is written there before the open, and the open passes no
	// HOME or TMPDIR.
	d.agentHome = agentenv.KeyHome(d.stateDir, sessionKey)
	d.sidecarLog = filepath.Join(tmp, "sidecar.log")
	d.stubLog = filepath.Join(tmp, "modelstub.log")
	for _, dir := range []string{d.workspace, d.stateDir} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return err
		}
	}
	d.apiKey = "sk-demo-" + randomHex(16)
	d.out.secret = d.apiKey
	d.mark = randomHex(8)
	d.out.line("workspace  %s (the agent's cwd)", d.workspace)
	d.out.line("state dir  %s", d.stateDir)
	d.out.line("agent HOME %s (the key's private HOME under the state dir: its XDG dirs and config)", d.agentHome)
	d.out.line("api key    sk-demo-… (random, never printed)")
	return nil
}

// markEnv is added to the environment of everything we start, so step 9 can
// find any survivor in /proc (notes/common.md).
func (d *demo) markEnv() string { return "DEMOHOST_MARK=" + d.mark }

// prepareAgent writes the agent's configuration for the stub at addr
// into the key's private HOME (agentenv.Prepare) and applies --command.
func (d *demo) prepareAgent(addr string) error {
	l, err := agentenv.Prepare(d.agent.Name, d.repoRoot, "http://"+addr, d.agentHome)
	if err != nil {
		return err
	}
	if d.override != "" {
		l.Command = agentenv.Command{Path: d.override, Args: d.agent.Args}
	}
	d.launch = l
	d.out.line("command    %s", strings.Join(append([]string{l.Command.Path}, l.Command.Args...), " "))
	d.out.line("HOME       %s", l.Home)
	keys := make([]string, 0, len(l.Env))
	for k := range l.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	d.out.line("env        %s, and %s (the key)", strings.Join(keys, " "), l.KeyEnv)
	return nil
}
