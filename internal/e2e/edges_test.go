package e2e

// The edges of issue 33: agents that die quietly, answers in ACP's own
// shapes, errors that say why.

import (
	"encoding/json"
	"testing"
	"time"
)

// TestStdinClosed_NextPromptFailsAtOnce: an agent that closes its stdin
// after session/new and lives on (ignoring SIGTERM) can never be reached
// again: the next prompt fails at once PROVIDER_PROCESS_LOST (not after the
// host gives up), the host hears session/exited reason "stdin-closed", and
// the tree is ended by the close policy with a complete provider-exit
// proof; nothing is left.
func TestStdinClosed_NextPromptFailsAtOnce(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "deafened", "close-stdin,ignore-term")
	start := time.Now()
	f := s.await(s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "hi"}), 15*time.Second)
	var res struct {
		Status string `json:"status"`
		Error  *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if f.Error != nil || json.Unmarshal(f.Result, &res) != nil || res.Status != "failed" || res.Error == nil || res.Error.Code != "PROVIDER_PROCESS_LOST" {
		t.Fatalf("prompt to an agent whose stdin is closed: %s %+v, want failed PROVIDER_PROCESS_LOST", f.Result, f.Error)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the prompt took %v to fail", d)
	}
	s.waitNote("session/exited", 10*time.Second, func(p json.RawMessage) bool {
		var n struct {
			Session, Reason string
		}
		return json.Unmarshal(p, &n) == nil && n.Session == o.Session && n.Reason == "stdin-closed"
	})
	raw := s.waitNote("cleanup/proof", 15*time.Second, func(p json.RawMessage) bool {
		var rp recoveredProof
		return json.Unmarshal(p, &rp) == nil && rp.Proof.Session == o.Session
	})
	var rp recoveredProof
	_ = json.Unmarshal(raw, &rp)
	if !rp.Proof.Complete || rp.Proof.Origin != "provider-exit" {
		t.Errorf("proof %+v: want complete, origin provider-exit", rp.Proof)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	_, _ = s.shutdownAndExit()
}
