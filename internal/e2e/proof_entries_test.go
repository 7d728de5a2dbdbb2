package e2e

import (
	"encoding/json"
	"testing"
	"time"
)

// proofEntry is one processes entry of a proof, as the wire has it.
type proofEntry struct {
	Pid      int    `json:"pid"`
	Role     string `json:"role"`
	ExitCode *int   `json:"exitCode"`
	Signal   string `json:"signal"`
	ReapedBy string `json:"reapedBy"`
}

// TestProof_ReapedByParent (docs/protocol.md §21, Proof entries): the
// agent's child dies of the close's SIGTERM and the agent (which traps
// SIGTERM) reaps it, so the sidecar sees it only gone: its proof entry
// says reapedBy "parent"; the agent itself, killed by SIGKILL, says
// signal; no entry says nothing. (Under subreaper containment the
// guardian lists only what it reaped, so the child is not listed.)
func TestProof_ReapedByParent(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := e.open(s, "reaped", "mortal-child,ignore-term")
	f := s.call("session/close", map[string]any{"session": o.Session, "reason": "test"})
	if f.Error != nil {
		t.Fatalf("close: %s %s", f.Error.Message, f.Error.Data)
	}
	var res struct {
		Proof struct {
			Complete    bool         `json:"complete"`
			Containment string       `json:"containment"`
			Processes   []proofEntry `json:"processes"`
		} `json:"proof"`
	}
	if err := json.Unmarshal(f.Result, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Proof.Complete {
		t.Fatalf("proof not complete: %s", f.Result)
	}
	var byParent, provider int
	for _, p := range res.Proof.Processes {
		if p.ExitCode == nil && p.Signal == "" && p.ReapedBy == "" {
			t.Errorf("entry %+v says nothing of how it ended", p)
		}
		if p.Role == "descendant" && p.ReapedBy == "parent" {
			byParent++
		}
		if p.Role == "provider" {
			provider++
			if p.Signal != "SIGKILL" || p.ReapedBy != "" {
				t.Errorf("provider entry %+v, want signal SIGKILL (it trapped SIGTERM), no reapedBy", p)
			}
		}
	}
	// Under subreaper containment the guardian lists only what it reaped:
	// a child its parent reaped is not in the proof at all.
	want := 1
	if res.Proof.Containment == "subreaper" {
		want = 0
	}
	if byParent != want || provider != 1 {
		t.Fatalf("processes %s: want the provider and %d descendant reapedBy parent", f.Result, want)
	}
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
