package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// Fencing between sidecars on one store (docs/protocol.md §24): a key
// another sidecar took over is never published or revived by its old owner.

// TestStateStore_TakeoverFencesTheOldOwner: B opens a key A holds (a
// takeover); A's next publication (its retire) fails STATE_FENCED, A's
// session ends — session/exited reason fenced, a complete proof, state
// closed — and B's head is byte-identical before and after; B keeps
// working and publishes.
func TestStateStore_TakeoverFencesTheOldOwner(t *testing.T) {
	key, _ := masterKeyFile(t)
	storeDir := t.TempDir()
	url := "file://" + storeDir
	eA, eB, agentA, agentB, sA, sB := sidecarPair(t, url, key)
	pA := storeParams(eA, "fence", agentA)
	pA["lifecycle"] = "warm" // A's tree stays up: its retire is asked for later
	oA := seedMustOpen(sA, pA)
	runTurn(t, sA, oA.Session, "a1", "one")

	oB := seedMustOpen(sB, storeParams(eB, "fence", agentB)) // takes the key over
	runTurn(t, sB, oB.Session, "b1", "two")
	waitParked(t, sB, oB.Session, 1)
	headFile := findHead(t, storeDir)
	before, err := os.ReadFile(headFile)
	if err != nil {
		t.Fatal(err)
	}

	// A publishes at its close: fenced.
	raw := closeRaw(t, sA, oA.Session)
	pub := proofPublication(t, raw)
	if pub == nil || pub.State != "failed" || pub.Error == nil || pub.Error.Code != "STATE_FENCED" {
		t.Fatalf("A's publication %+v: want failed STATE_FENCED", pub)
	}
	var pr proof
	_ = json.Unmarshal(raw, &pr)
	if !pr.Complete {
		t.Errorf("A's close proof not complete: %+v", pr)
	}
	after, _ := os.ReadFile(headFile)
	if string(after) != string(before) {
		t.Fatalf("A's fenced publication changed B's head:\n%s\n%s", before, after)
	}
	runTurn(t, sB, oB.Session, "b2", "three")
	waitParked(t, sB, oB.Session, 2)
	now, _ := os.ReadFile(headFile)
	if string(now) == string(before) {
		t.Errorf("B's retire did not publish")
	}
	_, _ = sA.shutdownAndExit()
	_, _ = sB.shutdownAndExit()
	waitNoMarked(t, eA.mark, eA.work, 5*time.Second)
}

// TestStateStore_FencedRetireEndsTheSession: a per-turn session whose key
// another sidecar took over learns it at its retire's publication: the
// session ends with session/exited reason "fenced", its retire proof
// complete, and the prompt after that fails; it never publishes again.
func TestStateStore_FencedRetireEndsTheSession(t *testing.T) {
	key, _ := masterKeyFile(t)
	url := "file://" + t.TempDir()
	eA, eB, agentA, agentB, sA, sB := sidecarPair(t, url, key)
	oA := seedMustOpen(sA, storeParams(eA, "fenced-retire", agentA))
	oB := seedMustOpen(sB, storeParams(eB, "fenced-retire", agentB)) // takeover before A's first retire
	runTurn(t, sA, oA.Session, "a1", "one")
	sA.waitNote("session/exited", 30*time.Second, func(p json.RawMessage) bool {
		return strings.Contains(string(p), `"reason":"fenced"`)
	})
	if st := statusOf(sA, oA.Session); st.State != "closed" {
		t.Errorf("A's state after the fenced retire: %q, want closed", st.State)
	}
	f := sA.call("session/prompt", map[string]any{"session": oA.Session, "requestId": "a2", "prompt": "again"})
	if f.Error == nil {
		t.Errorf("a prompt on the fenced session succeeded: %s", f.Result)
	}
	closeRaw(t, sB, oB.Session)
	_, _ = sA.shutdownAndExit()
	_, _ = sB.shutdownAndExit()
	waitNoMarked(t, eA.mark, eA.work, 5*time.Second)
}

// TestStateStore_ParkedSessionOfATakenKeyDoesNotRevive (issue 29's trial):
// a per-turn session whose key another sidecar took over while it was
// parked is not revived on its stale state: its next prompt fails
// STATE_FENCED at once, nothing is launched, and the session ends fenced.
func TestStateStore_ParkedSessionOfATakenKeyDoesNotRevive(t *testing.T) {
	key, _ := masterKeyFile(t)
	url := "file://" + t.TempDir()
	eA, eB, agentA, agentB, sA, sB := sidecarPair(t, url, key)
	oA := seedMustOpen(sA, storeParams(eA, "stale", agentA))
	runTurn(t, sA, oA.Session, "a1", "one")
	waitParked(t, sA, oA.Session, 1)
	oB := seedMustOpen(sB, storeParams(eB, "stale", agentB)) // takes the key over
	f := sA.call("session/prompt", map[string]any{"session": oA.Session, "requestId": "a2", "prompt": "two"})
	wantError(t, "prompt on a parked session whose key was taken over", f, -32000, "STATE_FENCED")
	sA.waitNote("session/exited", 10*time.Second, func(p json.RawMessage) bool {
		return strings.Contains(string(p), `"reason":"fenced"`)
	})
	sA.waitFor(10*time.Second, "session/lifecycle ended", func() bool {
		ls := lifecycleIn(sA.notes, oA.Session)
		return len(ls) > 0 && ls[len(ls)-1].State == "ended" && ls[len(ls)-1].Error != nil && ls[len(ls)-1].Error.Code == "STATE_FENCED"
	})
	waitNoMarked(t, eA.mark, eA.work, 5*time.Second)
	closeRaw(t, sB, oB.Session)
	_, _ = sA.shutdownAndExit()
	_, _ = sB.shutdownAndExit()
}

// sidecarPair starts two sidecars, A and B, on one store (url, key file)
// with state dirs, agent dirs and markers of their own and one workspace,
// as two machines sharing a bucket.
func sidecarPair(t *testing.T, url, key string) (eA, eB *faultEnv, agentA, agentB string, sA, sB *sidecar) {
	t.Helper()
	eA, eB = newFaultEnv(t), newFaultEnv(t)
	eB.work = eA.work
	agentA, agentB = agentWritableDir(t), agentWritableDir(t)
	sA = startSidecar(t, "--state-dir", eA.stateDir, "--state-store", url, "--state-key-file", key)
	sA.initialize(false)
	sB = startSidecar(t, "--state-dir", eB.stateDir, "--state-store", url, "--state-key-file", key)
	sB.initialize(false)
	return eA, eB, agentA, agentB, sA, sB
}
