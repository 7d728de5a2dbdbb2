package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
)

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
	return d.prepareAgent(addr.Addr)
}

func (d *demo) startSidecar() error {
	logf, err := os.Create(d.sidecarLog)
	if err != nil {
		return err
	}
	// The client copies the sidecar's stderr into it until the sidecar
	// exits: it is closed after the shutdown (teardown.go), never before.
	d.logFile = logf
	ctx, cancel := stepContext()
	defer cancel()
	// Start spawns the sidecar and runs initialize. The callbacks get every
	// notification that is not an update of a running turn (those go to
	// Prompt), one at a time and in wire order.
	c, err := client.Start(ctx, client.Options{
		Binary:     d.sidecarPath,
		StateDir:   d.stateDir,
		Args:       []string{"--log-level", "debug"}, // everything it logs, so the secret check below reads something
		Env:        append(os.Environ(), d.markEnv()),
		Stderr:     logf,
		OnUpdate:   d.showUpdate,
		OnDecision: d.showDecision,
		OnExited:   d.showExited,
		OnProof:    d.showLateProof,
	})
	if err != nil {
		return err
	}
	d.c = c
	info := c.Info()
	d.out.line("sidecar pid %d, logs (JSON lines) go to %s", info.Pid, d.sidecarLog)
	d.out.line("-> initialize {protocolVersion: 1}")
	d.out.line("<- %s %s, protocol %d, pid %d", info.ServerInfo.Name, info.ServerInfo.Version, info.ProtocolVersion, info.Pid)
	d.out.line("   containment: %s; agents: %s", info.Capabilities.Containment, strings.Join(info.Capabilities.Agents, ", "))
	return nil
}

// showUpdate prints one session/update (docs/protocol.md §9): agent text
// streams inline, anything else gets its own line.
func (d *demo) showUpdate(u client.Update) {
	if text, line := describeUpdate(u.Update); line != "" {
		d.out.line("  [%2d] %s", u.Seq, line)
	} else {
		d.out.stream(fmt.Sprintf("  [%2d] agent says: ", u.Seq), text)
	}
}

// showDecision prints a session/permission audit notification: how the
// sidecar answered the agent's permission ask.
func (d *demo) showDecision(p client.PermissionDecision) {
	s := fmt.Sprintf("  permission   %s for %s (kind %s) by rule %q", p.Decision, p.ToolCallID, p.Kind, p.Rule)
	if p.OptionID != "" {
		s += ", option " + p.OptionID
	}
	d.out.line("%s", s)
}

// showExited prints session/exited: the agent died on its own.
func (d *demo) showExited(e client.Exited) {
	d.out.line("  !! the agent (pid %d) exited on its own during %s: %s", e.Pid, e.During, howExited(e.ExitCode, e.Signal))
}

// showLateProof prints a cleanup/proof notification (a cleanup finished
// outside any request, e.g. after the agent exited).
func (d *demo) showLateProof(p client.Proof) {
	d.out.line("  late cleanup proof %s: complete=%v", p.CleanupID, p.Complete)
}
