package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

func (d *demo) openSession() error {
	// The launch env from agentenv (no HOME or TMPDIR: the sidecar gives
	// the agent the key's private HOME, where agentenv wrote its config,
	// and a private TMPDIR), plus the key and our marker.
	env := maps.Clone(d.launch.Env)
	env[d.launch.KeyEnv] = d.apiKey
	env["DEMOHOST_MARK"] = d.mark
	d.out.line("-> session/open key=%s agent=%s permissionMode=approve-all (env holds the key, not shown)", sessionKey, d.launch.Agent)
	ctx, cancel := stepContext()
	defer cancel()
	s, err := d.c.Open(ctx, client.OpenParams{
		SessionKey:     sessionKey,
		Agent:          d.launch.Agent,
		Command:        client.Command{Path: d.launch.Command.Path, Args: d.launch.Command.Args},
		Cwd:            d.workspace,
		Env:            env,
		PermissionMode: "approve-all",
	})
	if err != nil {
		// A failed open that launched anything carries its cleanup proof
		// (docs/protocol.md §5, `data.cleanup`).
		var cerr *client.Error
		if errors.As(err, &cerr) && cerr.Proof() != nil {
			d.out.line("<- the open failed; the sidecar cleaned up what it had launched:")
			for _, l := range describeProof(*cerr.Proof()) {
				d.out.line("   %s", l)
			}
		}
		return err
	}
	d.session = s
	res := s.Result()
	d.out.line("<- session %s (resumed=%v)", res.Session, res.Resumed)
	d.out.line("   agent:    %s %q version %s", res.Agent.Name, res.Agent.Title, res.Agent.Version)
	d.out.line("   identity: record %s, backend session %s, agent session %s",
		res.Identity.SessionKey, res.Identity.BackendSessionID, res.Identity.AgentSessionID)
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
	b := res.PermissionBinding
	d.out.line("   policy:   bound=%v mode=%q via %s (autonomous=%v)", b.Bound, b.Mode, b.Via, b.Autonomous)
	// The kernel sandbox the agent runs in (the sidecar's default,
	// workspace: docs/protocol.md §19), whatever its own mode says.
	if sb := res.Sandbox; sb != nil {
		d.out.line("   sandbox:  enforced=%v filesystem=%s signals=%s processes=%s capabilities=%s seccomp=%v landlockAbi=%d %s",
			sb.Enforced, sb.Filesystem, sb.Signals, sb.Processes, sb.Capabilities, sb.Seccomp, sb.LandlockABI, sb.Reason)
		if sb.Home != "" {
			d.out.line("   home:     %s (the key's private HOME)", sb.Home)
		}
		if !sb.Enforced && sb.Reason == "" {
			return fmt.Errorf("the agent runs without the default sandbox")
		}
	}
	return nil
}

func (d *demo) prompt() error {
	promptText := promptFor(d.agent.Name)
	d.out.line("-> session/prompt requestId=%s:", requestID)
	for _, l := range strings.Split(promptText, "\n") {
		d.out.line("     | %s", l)
	}
	ctx, cancel := stepContext()
	defer cancel()
	// The turn's session/update notifications reach showUpdate on this
	// goroutine, all of them before Prompt returns.
	res, err := d.session.Prompt(ctx, client.PromptParams{RequestID: requestID, Prompt: promptText}, d.showUpdate)
	if err != nil {
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
	if res.Status != protocol.TurnCompleted {
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
	d.out.line("-> session/status")
	ctx, cancel := stepContext()
	defer cancel()
	res, err := d.session.Status(ctx)
	if err != nil {
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
	ctx, cancel := stepContext()
	defer cancel()
	p, err := d.session.Close(ctx, client.CloseParams{Reason: "demo finished"})
	var cerr *client.Error
	if errors.As(err, &cerr) && cerr.Proof() != nil {
		p = cerr.Proof() // CLEANUP_INCOMPLETE carries the proof so far
	} else if err != nil {
		return err
	}
	if p == nil {
		return errors.New("session/close returned no proof")
	}
	d.proof = p
	for _, l := range describeProof(*p) {
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
