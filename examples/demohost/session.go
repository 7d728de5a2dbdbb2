package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
)

func (d *demo) openSession() error {
	// The launch env from agentenv (a private HOME keeps the agent's tool
	// shells independent of this machine's dotfiles), plus the key and our
	// marker.
	env := maps.Clone(d.launch.Env)
	env[d.launch.KeyEnv] = d.apiKey
	env["DEMOHOST_MARK"] = d.mark
	params := map[string]any{
		"sessionKey":     sessionKey,
		"agent":          d.launch.Agent,
		"command":        d.launch.Command,
		"cwd":            d.workspace,
		"env":            env,
		"permissionMode": "approve-all",
	}
	d.out.line("-> session/open key=%s agent=%s permissionMode=approve-all (env holds the key, not shown)", sessionKey, d.launch.Agent)
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
		Binding struct {
			Bound      bool   `json:"bound"`
			Mode       string `json:"mode"`
			Via        string `json:"via"`
			Autonomous bool   `json:"autonomous"`
		} `json:"permissionBinding"`
	}
	if err := d.rpc.call("session/open", params, &res); err != nil {
		// A failed open that launched anything carries its cleanup proof
		// (docs/protocol.md §5, `data.cleanup`).
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
	// How the sidecar holds the agent to the permission policy
	// (docs/agents.md): every tool use the agent would decide alone asks.
	d.out.line("   policy:   bound=%v mode=%q via %s (autonomous=%v)", res.Binding.Bound, res.Binding.Mode, res.Binding.Via, res.Binding.Autonomous)
	if res.Session == "" {
		return errors.New("session/open returned no session handle")
	}
	return nil
}

func (d *demo) prompt() error {
	promptText := promptFor(d.agent.Name)
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
