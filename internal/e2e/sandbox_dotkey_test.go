package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSandbox_DotKeyHomeHoldsOnlyItself (found by a user trial): the
// keys "." and ".." — left as they are by the record file's encoding —
// get a private HOME of their own inside homes/, never homes/ itself or
// the state dir: their agent cannot write another key's HOME, and a
// discarding close of theirs leaves every other key's HOME in place.
func TestSandbox_DotKeyHomeHoldsOnlyItself(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	var victim openResult
	s.mustCall("session/open", e.openParams("victim", "normal"), &victim)
	if victim.Sandbox.Home == "" {
		t.Fatal("no private HOME reported for the victim key")
	}
	for _, key := range []string{".", ".."} {
		var o openResult
		s.mustCall("session/open", e.openParams(key, "probe"), &o)
		if want := filepath.Join(e.stateDir, "homes", strings.Repeat("%2E", len(key))); o.Sandbox.Home != want {
			t.Fatalf("key %q: sandbox.home %q, want %q", key, o.Sandbox.Home, want)
		}
		planted := filepath.Join(victim.Sandbox.Home, ".bashrc")
		got := probeTurn(t, s, o.Session, "p", "write "+planted, "write "+o.Sandbox.Home+"/mine")
		wantProbes(t, got, map[string]string{"write " + planted: "denied", "write " + o.Sandbox.Home + "/mine": "ok"})
		if p := closeProof(s, o.Session, map[string]any{"discardPersistentState": true}); !p.Complete {
			t.Fatalf("key %q: discarding close: %+v", key, p)
		}
		if _, err := os.Stat(victim.Sandbox.Home); err != nil {
			t.Fatalf("key %q's discarding close removed another key's HOME: %v", key, err)
		}
	}
	if p := closeProof(s, victim.Session, nil); !p.Complete {
		t.Fatalf("close: %+v", p)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
