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

// onNotify prints one notification from the sidecar (docs/protocol.md §9). It
// runs on the client's reader goroutine, in wire order.
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
