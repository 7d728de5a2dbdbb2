package e2e

// Process-table containment (docs/operations.md, "macOS"): the macOS
// algorithm run here with --containment=process-table. The containment,
// cleanup, close and shutdown tests also run under it (`make test`'s second
// e2e run sets ACPX_E2E_CONTAINMENT); these are the tests of what only this
// mode does: no watchdog, so a SIGKILLed sidecar's trees are left to the
// next sidecar on the same stateDir, and proofs that say what the mode
// cannot see. (A pre-launch ledger entry of this mode:
// TestSidecarKilled_LedgerEntryWrittenBeforeLaunchIsRecovered.)

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

const processTable = "process-table"

// TestProcessTable_ProofSaysWhatItCannotSee: initialize reports the mode, a
// close proof is complete with containment "process-table", and its
// verified.method names what was scanned and what this mode cannot see.
func TestProcessTable_ProofSaysWhatItCannotSee(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir, "--containment", processTable)
	init := s.initialize(false)
	if caps, _ := init["capabilities"].(map[string]any); caps["containment"] != processTable {
		t.Fatalf("initialize capabilities %v, want containment process-table", init["capabilities"])
	}
	o := e.open(s, "pt", "")
	if o.Process.Containment != processTable {
		t.Errorf("open process.containment %q", o.Process.Containment)
	}
	pr := seedCloseProof(t, s, o.Session, nil)
	if !pr.Complete || pr.Containment != processTable {
		t.Fatalf("close proof %+v, want complete process-table", pr)
	}
	for _, want := range []string{"two consecutive scans", "reap cycle", "environment marker", "Not visible to this mode"} {
		if !strings.Contains(pr.Verified.Method, want) {
			t.Errorf("verified.method %q does not say %q", pr.Verified.Method, want)
		}
	}
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestProcessTable_SidecarKilledTreesRecoveredByTheNextSidecar: the
// sidecar is SIGKILLed with live sessions, one with a setsid'd grandchild
// that ignores SIGTERM. This mode has no watchdog, so the grandchild
// outlives the sidecar (asserted, or the test proves nothing); the next
// sidecar on the same stateDir kills it from the ownership ledger and
// reports each entry as a complete recovered proof (containment
// process-table) naming every survivor; then nothing is alive and the
// ledger is empty.
func TestProcessTable_SidecarKilledTreesRecoveredByTheNextSidecar(t *testing.T) {
	startOrphanReaper(t)
	stateDir, cwd := t.TempDir(), t.TempDir()
	mark := testmark.New()
	killMarkedOnCleanup(t, mark)
	s := startSidecar(t, "--state-dir", stateDir, "--containment", processTable)
	trackChild(s.cmd.Process.Pid)
	s.initialize(false)
	a := openFault(t, s, "a", cwd, mark, "normal")
	b := openFault(t, s, "b", cwd, mark, "grandchild")
	grandchild := faultChildOf(t, mark, b.Process.Pid)
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.exited
	if !isMarkedAlive(mark, grandchild) {
		t.Fatalf("the grandchild %d died with the sidecar: this test would prove nothing", grandchild)
	}
	survivors := markedPids(mark, "")

	s2 := startSidecar(t, "--state-dir", stateDir, "--containment", processTable)
	trackChild(s2.cmd.Process.Pid)
	s2.initialize(false)
	named := map[int]bool{}
	for _, key := range []string{"a", "b"} {
		raw := s2.waitNote("cleanup/proof", 10*time.Second, func(p json.RawMessage) bool {
			var rp recoveredProof
			return json.Unmarshal(p, &rp) == nil && rp.Proof.SessionKey == key && rp.Proof.Origin == "recovered"
		})
		var rp recoveredProof
		_ = json.Unmarshal(raw, &rp)
		if !rp.Proof.Complete || rp.Proof.Containment != processTable || !strings.HasPrefix(rp.Proof.Verified.Method, "process-table:") {
			t.Errorf("recovered proof for %q: %+v", key, rp.Proof)
		}
		for _, p := range rp.Proof.Processes {
			named[p.Pid] = true
		}
	}
	if !named[grandchild] {
		t.Errorf("recovered proofs do not name the surviving grandchild %d: %v", grandchild, named)
	}
	for _, pid := range survivors {
		// A provider may still have been exiting on its stdin's EOF when
		// survivors were listed; any other survivor must be named.
		if pid != a.Process.Pid && pid != b.Process.Pid && !named[pid] {
			t.Errorf("recovered proofs do not name surviving process %d: %v", pid, named)
		}
	}
	waitNoMarked(t, mark, cwd, 5*time.Second)
	s2.waitFor(5*time.Second, "empty ownership ledger", func() bool {
		return len(ledgerEntries(t, stateDir)) == 0
	})
	if _, status := s2.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}

// isMarkedAlive reports whether pid is a live process carrying mark.
func isMarkedAlive(mark string, pid int) bool {
	for _, p := range markedPids(mark, "") {
		if p == pid {
			return true
		}
	}
	return false
}
