package e2e

// Two sidecars on one stateDir (docs/operations.md, "Sharing a stateDir";
// docs/protocol.md §8 session/open): a sessionKey a live session of one
// sidecar holds is refused to the other with SESSION_KEY_IN_USE
// (data.heldBy "another-sidecar"), which launches nothing and touches
// neither the key's record nor its journal; the other sidecar still reads
// the key's session/events; once the holder closes the session, the key
// is free for the other sidecar.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSharedStateDir_KeyHeldByAnotherSidecarIsRefused(t *testing.T) {
	e := newFaultEnv(t)
	s1 := startSidecar(t, seedArgs(e)...)
	s1.initialize(false)
	o1 := e.open(s1, "shared", "normal")
	runTurn(t, s1, o1.Session, "t1", "go")
	journalPath := filepath.Join(e.stateDir, "sessions", "shared.journal.ndjson")
	recordBefore, err := os.ReadFile(e.recordPath("shared"))
	if err != nil {
		t.Fatal(err)
	}
	journalBefore, err := os.ReadFile(journalPath)
	if err != nil || len(journalBefore) == 0 {
		t.Fatalf("journal of the first session: %v (%d bytes)", err, len(journalBefore))
	}
	providers := markedPids(e.mark, e.work)

	s2 := startSidecar(t, seedArgs(e)...)
	s2.initialize(false)
	// resume: false, the worst case: a new session would start the key's
	// record and journal anew.
	fresh := e.openParams("shared", "normal")
	fresh["resume"] = false
	f := s2.call("session/open", fresh)
	d := wantError(t, "open of a key another sidecar holds", f, -32000, "SESSION_KEY_IN_USE")
	if d.Retryable == nil || !*d.Retryable {
		t.Errorf("SESSION_KEY_IN_USE not retryable: %s", f.Error.Data)
	}
	var held struct {
		HeldBy string `json:"heldBy"`
	}
	_ = json.Unmarshal(f.Error.Data, &held)
	if held.HeldBy != "another-sidecar" {
		t.Errorf("data.heldBy %q, want another-sidecar: %s", held.HeldBy, f.Error.Data)
	}
	if d.Cleanup != nil {
		t.Errorf("a refusal that launched nothing carries data.cleanup")
	}
	if !strings.Contains(f.Error.Message, "another sidecar") {
		t.Errorf("message %q does not say another sidecar holds the key", f.Error.Message)
	}
	if now := markedPids(e.mark, e.work); len(now) != len(providers) {
		t.Errorf("marked processes %v after the refused open, %v before: it launched something", now, providers)
	}
	if b, _ := os.ReadFile(e.recordPath("shared")); !bytes.Equal(b, recordBefore) {
		t.Errorf("the refused open changed the record:\nbefore %s\nafter  %s", recordBefore, b)
	}
	if b, _ := os.ReadFile(journalPath); !bytes.Equal(b, journalBefore) {
		t.Errorf("the refused open changed the journal (%d bytes before, %d after)", len(journalBefore), len(b))
	}
	if l := listSessions(s2); len(l) != 0 {
		t.Errorf("the refusing sidecar lists sessions %v", l)
	}

	// The holder's session is intact: status reads its record, a turn's
	// updates reach the journal, which the other sidecar reads (read-only).
	if st := statusOf(s1, o1.Session); st.State != "open" {
		t.Errorf("holder's session state %q, want open", st.State)
	}
	runTurn(t, s1, o1.Session, "t2", "go")
	sent := updatesOf(s1, o1.Session)
	events, _ := readEvents(t, s2, "shared", "", 0, 0)
	wantCatchUp(t, sent, journalUpdates(t, events), 0, true)

	// Closed by its holder, the key is free for the other sidecar (the
	// fault agent keeps no sessions across processes: a new session).
	if p := closeProof(s1, o1.Session, nil); !p.Complete {
		t.Fatalf("close proof incomplete: %+v", p)
	}
	var o2 openResult
	s2.mustCall("session/open", fresh, &o2)
	// And now the first sidecar is the one refused.
	f = s1.call("session/open", fresh)
	wantError(t, "open on the first sidecar of a key the second holds", f, -32000, "SESSION_KEY_IN_USE")
	closeProof(s2, o2.Session, nil)
	if _, status := s1.shutdownAndExit(); status != 0 {
		t.Errorf("first sidecar exit status %d", status)
	}
	if _, status := s2.shutdownAndExit(); status != 0 {
		t.Errorf("second sidecar exit status %d", status)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestSharedStateDir_HolderDiesKeyIsFree: the kernel drops a dead
// sidecar's hold, so a SIGKILLed holder leaves no stale lock: another
// sidecar on the stateDir opens the key at once (the ledger recovers the
// dead one's leftovers).
func TestSharedStateDir_HolderDiesKeyIsFree(t *testing.T) {
	startOrphanReaper(t)
	e := newFaultEnv(t)
	s1 := startSidecar(t, seedArgs(e)...)
	trackChild(s1.cmd.Process.Pid)
	s1.initialize(false)
	e.open(s1, "dies", "normal")
	if err := s1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s1.exited
	s2 := startSidecar(t, seedArgs(e)...)
	s2.initialize(false)
	var o openResult
	s2.mustCall("session/open", e.openParams("dies", "normal"), &o)
	closeProof(s2, o.Session, nil)
	if _, status := s2.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
