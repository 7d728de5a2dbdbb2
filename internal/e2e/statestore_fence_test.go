package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
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

// TestStateStore_CorruptOpenLeavesTheHeadAndTheOwner (a user trial: an
// open refused STATE_CORRUPT had moved the head 9→10 to itself, and the
// live owner's next prompt failed STATE_FENCED): with every archive of
// the key damaged, B's open fails STATE_CORRUPT with nothing launched, the
// head byte-identical, and no private HOME of the key left in B's state
// dir; A, the owner, revives for its next turn, remembers the first, and
// its retire publishes.
func TestStateStore_CorruptOpenLeavesTheHeadAndTheOwner(t *testing.T) {
	key, _ := masterKeyFile(t)
	storeDir := t.TempDir()
	eA, eB, agentA, agentB, sA, sB := sidecarPair(t, "file://"+storeDir, key)
	oA := seedMustOpen(sA, storeParams(eA, "corrupt-open", agentA))
	runTurn(t, sA, oA.Session, "a1", "alpha")
	waitParked(t, sA, oA.Session, 1)
	headFile := findHead(t, storeDir)
	before, err := os.ReadFile(headFile)
	if err != nil {
		t.Fatal(err)
	}
	objs, _ := filepath.Glob(filepath.Join(filepath.Dir(headFile), "archives", "*"))
	if len(objs) == 0 {
		t.Fatal("no archive in the store")
	}
	for _, o := range objs {
		b, err := os.ReadFile(o)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(o, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pB := storeParams(eB, "corrupt-open", agentB)
	delete(pB, "inheritEnv") // the agent's HOME is the key's private one, made by the open
	d := wantError(t, "B's open over damaged archives", sB.call("session/open", pB), -32000, "STATE_CORRUPT")
	if d.Cleanup == nil || !d.Cleanup.Complete || len(d.Cleanup.Processes) != 0 {
		t.Errorf("refusal's cleanup %+v: want nothing launched", d.Cleanup)
	}
	if after, _ := os.ReadFile(headFile); !bytes.Equal(after, before) {
		t.Fatalf("the refused open changed the head:\n%s\n%s", before, after)
	}
	if _, err := os.Lstat(filepath.Join(eB.stateDir, "homes", "corrupt-open")); !os.IsNotExist(err) {
		t.Errorf("the refused open left the key's private HOME in B's state dir (%v)", err)
	}
	runTurn(t, sA, oA.Session, "a2", "beta")
	if txt := turnText(sA, oA.Session, "a2"); !strings.Contains(txt, "recall: 1 earlier prompts: alpha") {
		t.Errorf("A's agent does not remember its first turn: %q", txt)
	}
	waitParked(t, sA, oA.Session, 2)
	if pub := lifecyclePublication(t, sA, oA.Session, 2); pub == nil || pub.State != "published" {
		t.Errorf("A's retire after B's refused open: %+v, want published", pub)
	}
	closeRaw(t, sA, oA.Session)
	_, _ = sA.shutdownAndExit()
	_, _ = sB.shutdownAndExit()
	waitNoMarked(t, eA.mark, eA.work, 5*time.Second)
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
