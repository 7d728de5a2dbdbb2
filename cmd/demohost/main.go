// Command demohost is a small, readable demo host for acpx-sidecar. It
// starts the loopback model stub, spawns the sidecar and drives one real
// codex-acp session over the host protocol (shared/design/PROTOCOL.md):
// initialize, session/open, session/prompt (a turn in which the agent runs
// a shell command through a tool call), session/status, session/close
// (printing the cleanup proof), shutdown and exit.
//
// Usage, from the repository root:
//
//	npm ci
//	go build -o bin/acpx-sidecar ./cmd/acpx-sidecar
//	go build -o bin/modelstub ./cmd/modelstub
//	go run ./cmd/demohost [--sidecar PATH] [--modelstub PATH] [--codex PATH]
//
// Everything it makes (workspace, state dir, CODEX_HOME, logs) lives in one
// temporary directory that is removed at the end. It exits 0 when every
// step succeeded, the agent created made.txt and the cleanup proof is
// complete; 1 otherwise (with a FAILED line saying why); 2 on bad flags.
// Each step is bounded by 120 s. The API key it invents is never printed.
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/modelstub"
)

// stepTimeout bounds every step that waits on another process.
const stepTimeout = 120 * time.Second

const (
	sessionKey = "demo-1"
	requestID  = "turn-1"
	promptText = "Please create a file.\nrun: echo hello from codex > made.txt"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demohost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sidecar := fs.String("sidecar", "bin/acpx-sidecar", "path of the acpx-sidecar binary")
	stub := fs.String("modelstub", "bin/modelstub", "path of the loopback model stub binary")
	codex := fs.String("codex", "node_modules/.bin/codex-acp", "path of the codex-acp launcher")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demohost: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	d := &demo{out: &printer{w: stdout}}
	for _, p := range []struct {
		dst  *string
		flag string
		val  string
	}{{&d.sidecarPath, "--sidecar", *sidecar}, {&d.stubPath, "--modelstub", *stub}, {&d.codexPath, "--codex", *codex}} {
		abs, err := filepath.Abs(p.val)
		if err != nil {
			fmt.Fprintf(stderr, "demohost: %s: %v\n", p.flag, err)
			return 2
		}
		*p.dst = abs
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
	d.out.line("demo finished OK")
	return 0
}

// demo holds everything one run starts or makes, so cleanup can undo it.
type demo struct {
	out                              *printer
	sidecarPath, stubPath, codexPath string

	tmp, workspace, stateDir, codexHome string
	sidecarLog, stubLog                 string
	apiKey, mark                        string

	stub      *exec.Cmd
	stubStdin io.WriteCloser
	stubDone  chan error

	sidecar      *exec.Cmd
	sidecarStdin io.WriteCloser
	sidecarDone  chan error // receives cmd.Wait's result once
	sidecarExit  *error     // set once the exit was collected
	rpc          *client

	session string
	proof   json.RawMessage
}

func (d *demo) steps() error {
	for _, s := range []struct {
		title string
		fn    func() error
	}{
		{"0. prepare a temporary workspace", d.prepare},
		{"1. start the loopback model", d.startModel},
		{"2. start the sidecar and initialize", d.startSidecar},
		{"3. open a codex session", d.openSession},
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
	for _, p := range []struct{ name, path string }{
		{"sidecar", d.sidecarPath}, {"modelstub", d.stubPath}, {"codex-acp", d.codexPath},
	} {
		st, err := os.Stat(p.path)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("%s binary %s is missing or not executable (build it first, see `go doc ./cmd/demohost`)", p.name, p.path)
		}
		d.out.line("%-10s %s", p.name, p.path)
	}
	tmp, err := os.MkdirTemp("", "acpx-demo-")
	if err != nil {
		return err
	}
	d.tmp = tmp
	d.workspace = filepath.Join(tmp, "workspace")
	d.stateDir = filepath.Join(tmp, "state")
	d.codexHome = filepath.Join(tmp, "codex-home")
	d.sidecarLog = filepath.Join(tmp, "sidecar.log")
	d.stubLog = filepath.Join(tmp, "modelstub.log")
	for _, dir := range []string{d.workspace, d.stateDir, d.codexHome} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return err
		}
	}
	d.apiKey = "sk-demo-" + randomHex(16)
	d.out.secret = d.apiKey
	d.mark = randomHex(8)
	d.out.line("workspace  %s (the agent's cwd)", d.workspace)
	d.out.line("state dir  %s", d.stateDir)
	d.out.line("CODEX_HOME %s", d.codexHome)
	d.out.line("api key    sk-demo-… (random, never printed)")
	return nil
}

// markEnv is added to the environment of everything we start, so step 9 can
// find any survivor in /proc (notes/common.md).
func (d *demo) markEnv() string { return "DEMOHOST_MARK=" + d.mark }

func (d *demo) startModel() error {
	logf, err := os.Create(d.stubLog)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(d.stubPath)
	cmd.Env = append(os.Environ(), d.markEnv())
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe() // the stub exits when we close this
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	d.stub, d.stubStdin, d.stubDone = cmd, stdin, make(chan error, 1)
	go func() { d.stubDone <- cmd.Wait() }()

	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var addr struct {
		Addr string `json:"addr"`
	}
	select {
	case l := <-line:
		if err := json.Unmarshal([]byte(l), &addr); err != nil || addr.Addr == "" {
			return fmt.Errorf("model stub printed %q, want {\"addr\":\"127.0.0.1:PORT\"}", strings.TrimSpace(l))
		}
	case <-time.After(stepTimeout):
		return fmt.Errorf("TIMEOUT: the model stub printed no address within %v", stepTimeout)
	}
	d.out.line("model stub pid %d listening on %s", cmd.Process.Pid, addr.Addr)
	if err := modelstub.WriteCodexHome(d.codexHome, "http://"+addr.Addr); err != nil {
		return err
	}
	d.out.line("wrote %s (codex will talk to the stub)", filepath.Join(d.codexHome, "config.toml"))
	return nil
}

func (d *demo) startSidecar() error {
	logf, err := os.Create(d.sidecarLog)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(d.sidecarPath, "--state-dir", d.stateDir, "--log-level", "warn")
	cmd.Env = append(os.Environ(), d.markEnv())
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	d.sidecar, d.sidecarStdin, d.sidecarDone = cmd, stdin, make(chan error, 1)
	go func() { d.sidecarDone <- cmd.Wait() }()
	d.rpc = newClient(stdout, stdin, stepTimeout, d.onNotify, func(method string) {
		d.out.line("  <- sidecar asked us %s; answered method-not-found", method)
	})
	d.out.line("sidecar pid %d, logs (JSON lines) go to %s", cmd.Process.Pid, d.sidecarLog)

	var res struct {
		ProtocolVersion int `json:"protocolVersion"`
		ServerInfo      struct {
			Name, Version string
		} `json:"serverInfo"`
		Pid          int `json:"pid"`
		Capabilities struct {
			Containment string   `json:"containment"`
			Agents      []string `json:"agents"`
		} `json:"capabilities"`
	}
	d.out.line("-> initialize {protocolVersion: 1}")
	if err := d.rpc.call("initialize", map[string]any{
		"protocolVersion": 1,
		"clientInfo":      map[string]string{"name": "demohost", "version": "0.1.0"},
		"capabilities":    map[string]bool{"permissionRequests": false},
	}, &res); err != nil {
		return err
	}
	d.out.line("<- %s %s, protocol %d, pid %d", res.ServerInfo.Name, res.ServerInfo.Version, res.ProtocolVersion, res.Pid)
	d.out.line("   containment: %s; agents: %s", res.Capabilities.Containment, strings.Join(res.Capabilities.Agents, ", "))
	return nil
}

// onNotify prints one notification from the sidecar (PROTOCOL §5). It runs
// on the client's reader goroutine, in wire order.
func (d *demo) onNotify(method string, params json.RawMessage) {
	switch method {
	case "session/update":
		var n struct {
			Seq    int64           `json:"seq"`
			Update json.RawMessage `json:"update"`
		}
		_ = json.Unmarshal(params, &n)
		if text, line := describeUpdate(n.Update); line != "" {
			d.out.line("  [%2d] %s", n.Seq, line)
		} else {
			d.out.stream(fmt.Sprintf("  [%2d] agent says: ", n.Seq), text)
		}
	case "session/permission":
		var n struct {
			ToolCallID, Kind, Decision, Rule, OptionID string
		}
		_ = json.Unmarshal(params, &n)
		s := fmt.Sprintf("  permission   %s for %s (kind %s) by rule %q", n.Decision, n.ToolCallID, n.Kind, n.Rule)
		if n.OptionID != "" {
			s += ", option " + n.OptionID
		}
		d.out.line("%s", s)
	case "session/exited":
		var n struct {
			Pid      int    `json:"pid"`
			ExitCode *int   `json:"exitCode"`
			Signal   string `json:"signal"`
			During   string `json:"during"`
		}
		_ = json.Unmarshal(params, &n)
		d.out.line("  !! the agent (pid %d) exited on its own during %s: %s", n.Pid, n.During, howExited(n.ExitCode, n.Signal))
	case "cleanup/proof":
		var n struct {
			Proof proof `json:"proof"`
		}
		_ = json.Unmarshal(params, &n)
		d.out.line("  late cleanup proof %s: complete=%v", n.Proof.CleanupID, n.Proof.Complete)
	default:
		d.out.line("  notification %s", method)
	}
}

func (d *demo) openSession() error {
	params := map[string]any{
		"sessionKey": sessionKey,
		"agent":      "codex",
		"command":    map[string]string{"path": d.codexPath},
		"cwd":        d.workspace,
		"env": map[string]string{
			"OPENAI_API_KEY": d.apiKey,
			"CODEX_HOME":     d.codexHome,
			// The agent runs tools with `bash -lc`: a private HOME keeps them
			// independent of this machine's dotfiles (and fast).
			"HOME":          d.codexHome,
			"DEMOHOST_MARK": d.mark,
		},
		"permissionMode": "approve-all",
	}
	d.out.line("-> session/open key=%s agent=codex permissionMode=approve-all (env holds the key, not shown)", sessionKey)
	var res struct {
		Session  string `json:"session"`
		Resumed  bool   `json:"resumed"`
		Identity struct {
			AcpxRecordID, BackendSessionID, AgentSessionID string
		} `json:"identity"`
		Agent struct {
			Name, Title, Version string
		} `json:"agent"`
		Models *struct {
			CurrentModelID string `json:"currentModelId"`
		} `json:"models"`
		Modes *struct {
			CurrentModeID string `json:"currentModeId"`
		} `json:"modes"`
		Process struct {
			Pid, Pgid   int
			Containment string
		} `json:"process"`
	}
	if err := d.rpc.call("session/open", params, &res); err != nil {
		// A failed open that launched anything carries its cleanup proof
		// (PROTOCOL §3).
		var rerr *rpcError
		var p proof
		if errors.As(err, &rerr) && json.Unmarshal(rerr.Data.Cleanup, &p) == nil {
			d.out.line("<- the open failed; the sidecar cleaned up what it had launched:")
			for _, l := range describeProof(p) {
				d.out.line("   %s", l)
			}
		}
		return err
	}
	d.session = res.Session
	d.out.line("<- session %s (resumed=%v)", res.Session, res.Resumed)
	d.out.line("   agent:    %s %q version %s", res.Agent.Name, res.Agent.Title, res.Agent.Version)
	d.out.line("   identity: record %s, backend session %s, agent session %s",
		res.Identity.AcpxRecordID, res.Identity.BackendSessionID, res.Identity.AgentSessionID)
	d.out.line("   process:  pid %d, pgid %d, containment %s", res.Process.Pid, res.Process.Pgid, res.Process.Containment)
	model, mode := "(not reported)", "(not reported)"
	if res.Models != nil {
		model = res.Models.CurrentModelID
	}
	if res.Modes != nil {
		mode = res.Modes.CurrentModeID
	}
	d.out.line("   model:    %s; mode: %s", model, mode)
	if res.Session == "" {
		return errors.New("session/open returned no session handle")
	}
	return nil
}

func (d *demo) prompt() error {
	d.out.line("-> session/prompt requestId=%s:", requestID)
	for _, l := range strings.Split(promptText, "\n") {
		d.out.line("     | %s", l)
	}
	var res struct {
		RequestID  string `json:"requestId"`
		Status     string `json:"status"`
		StopReason string `json:"stopReason"`
		Usage      *struct {
			InputTokens, OutputTokens, TotalTokens int64
		} `json:"usage"`
		Error *struct {
			Code, Message string
		} `json:"error"`
	}
	if err := d.rpc.call("session/prompt", map[string]any{
		"session": d.session, "requestId": requestID, "prompt": promptText,
	}, &res); err != nil {
		return err
	}
	s := fmt.Sprintf("<- turn %s: status=%s stopReason=%s", res.RequestID, res.Status, res.StopReason)
	if res.Usage != nil {
		s += fmt.Sprintf(" usage in=%d out=%d total=%d", res.Usage.InputTokens, res.Usage.OutputTokens, res.Usage.TotalTokens)
	} else {
		s += " (no usage in the result)"
	}
	d.out.line("%s", s)
	if res.Error != nil {
		return fmt.Errorf("the turn failed: %s: %s", res.Error.Code, res.Error.Message)
	}
	if res.Status != "completed" {
		return fmt.Errorf("turn status %q, want completed", res.Status)
	}
	return nil
}

func (d *demo) checkFile() error {
	path := filepath.Join(d.workspace, "made.txt")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("the agent did not create %s: %v", path, err)
	}
	d.out.line("%s exists, content: %q", path, string(b))
	return nil
}

func (d *demo) status() error {
	var res struct {
		State         string  `json:"state"`
		LastRequestID *string `json:"lastRequestId"`
		Models        *struct {
			CurrentModelID string `json:"currentModelId"`
		} `json:"models"`
		Summary string `json:"summary"`
	}
	d.out.line("-> session/status")
	if err := d.rpc.call("session/status", map[string]string{"session": d.session}, &res); err != nil {
		return err
	}
	last, model := "(none)", "(not reported)"
	if res.LastRequestID != nil {
		last = *res.LastRequestID
	}
	if res.Models != nil {
		model = res.Models.CurrentModelID
	}
	d.out.line("<- state=%s lastRequestId=%s current model=%s", res.State, last, model)
	d.out.line("   summary: %s", res.Summary)
	return nil
}

func (d *demo) closeSession() error {
	d.out.line("-> session/close reason=%q", "demo finished")
	var res struct {
		Proof json.RawMessage `json:"proof"`
	}
	err := d.rpc.call("session/close", map[string]string{"session": d.session, "reason": "demo finished"}, &res)
	var rerr *rpcError
	if errors.As(err, &rerr) && len(rerr.Data.Proof) > 0 {
		res.Proof = rerr.Data.Proof // CLEANUP_INCOMPLETE carries the proof so far
	} else if err != nil {
		return err
	}
	d.proof = res.Proof
	var p proof
	if e := json.Unmarshal(res.Proof, &p); e != nil {
		return fmt.Errorf("unreadable proof: %v", e)
	}
	for _, l := range describeProof(p) {
		d.out.line("   %s", l)
	}
	if err != nil {
		return err
	}
	if !p.Complete {
		return errors.New("the cleanup proof is not complete")
	}
	return nil
}

func (d *demo) shutdown() error {
	var res struct {
		Proofs []proof `json:"proofs"`
	}
	d.out.line("-> shutdown")
	if err := d.rpc.call("shutdown", map[string]any{}, &res); err != nil {
		return err
	}
	var closed proof
	_ = json.Unmarshal(d.proof, &closed)
	d.out.line("<- %d proof(s)", len(res.Proofs))
	for _, p := range res.Proofs {
		note := ""
		if p.CleanupID == closed.CleanupID {
			note = " (the proof of step 7: our session was already closed)"
		}
		d.out.line("   %s complete=%v%s", p.CleanupID, p.Complete, note)
		if !p.Complete {
			return fmt.Errorf("shutdown proof %s is not complete", p.CleanupID)
		}
	}
	d.out.line("-> exit (notification)")
	if err := d.rpc.notify("exit", nil); err != nil {
		return err
	}
	werr, ok := d.waitSidecar(stepTimeout)
	if !ok {
		return fmt.Errorf("TIMEOUT: the sidecar did not exit within %v of exit", stepTimeout)
	}
	if werr != nil {
		return fmt.Errorf("sidecar exited with %v, want status 0", werr)
	}
	d.out.line("sidecar exited with status 0")
	return nil
}

// waitSidecar waits up to limit for the sidecar to exit; ok is false on
// timeout. Calling it again after an exit returns the same result.
func (d *demo) waitSidecar(limit time.Duration) (err error, ok bool) {
	if d.sidecarExit != nil {
		return *d.sidecarExit, true
	}
	select {
	case err = <-d.sidecarDone:
		d.sidecarExit = &err
		return err, true
	case <-time.After(limit):
		return nil, false
	}
}

// checkNoLeftovers scans /proc for a live process carrying our marker in
// its environment: the provider tree (which the sidecar launched with our
// env) and the sidecar itself must all be gone; only the model stub may
// still run. Zombies are skipped: PID 1 here never reaps them.
func (d *demo) checkNoLeftovers() error {
	left := markedProcesses([]byte(d.markEnv()), d.stub.Process.Pid)
	if len(left) > 0 {
		return fmt.Errorf("processes still alive with our marker: %v", left)
	}
	d.out.line("no live process carries our env marker (model stub aside)")
	b, err := os.ReadFile(d.sidecarLog)
	if err != nil {
		return err
	}
	if bytes.Contains(b, []byte(d.apiKey)) {
		return errors.New("the sidecar log contains the API key")
	}
	d.out.line("the sidecar log (%d bytes) does not contain the API key", len(b))
	return nil
}

// markedProcesses lists the pids (other than except) whose environment
// holds mark and whose state is not Z.
func markedProcesses(mark []byte, except int) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == except || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, mark) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// state is the field after the ")" that closes the command name.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// cleanup stops whatever is still running and removes the temp dir. It
// runs after success and after failure.
func (d *demo) cleanup() {
	d.out.header("10. clean up")
	if d.sidecar != nil {
		if _, ok := d.waitSidecar(0); !ok {
			// Closing stdin is the same as shutdown then exit (PROTOCOL §2.4).
			d.out.line("closing the sidecar's stdin (it shuts down on EOF)")
			_ = d.sidecarStdin.Close()
			if werr, ok := d.waitSidecar(30 * time.Second); ok {
				d.out.line("sidecar exited: %v", exitText(werr))
			} else {
				d.out.line("WARNING: sidecar still running after 30s; killing it (its agents may survive)")
				_ = d.sidecar.Process.Kill()
				d.waitSidecar(5 * time.Second)
			}
		}
	}
	if d.stub != nil {
		_ = d.stubStdin.Close() // the stub exits on stdin EOF
		select {
		case err := <-d.stubDone:
			d.out.line("model stub stopped: %s", exitText(err))
		case <-time.After(10 * time.Second):
			_ = d.stub.Process.Signal(syscall.SIGTERM)
			d.out.line("model stub did not stop on EOF; sent SIGTERM: %s", exitText(<-d.stubDone))
		}
	}
	if d.tmp != "" {
		if err := os.RemoveAll(d.tmp); err != nil {
			d.out.line("WARNING: could not remove %s: %v", d.tmp, err)
		} else {
			d.out.line("removed %s", d.tmp)
		}
	}
	if d.proof != nil {
		var buf bytes.Buffer
		if json.Compact(&buf, d.proof) == nil {
			d.out.line("")
			d.out.line("the cleanup proof as JSON:")
			d.out.line("%s", buf.String())
		}
	}
}

func exitText(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// showLogTail prints the last lines of a log file, scrubbed of the key.
func (d *demo) showLogTail(name, path string) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	d.out.line("last lines of the %s:", name)
	for _, l := range lines {
		if len(l) > 300 {
			l = l[:300] + "…"
		}
		d.out.line("  %s", l)
	}
}
