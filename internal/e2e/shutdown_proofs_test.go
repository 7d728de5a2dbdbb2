package e2e

// Proofs of a shutdown the host did not ask for (docs/protocol.md §16,
// Proofs at shutdown): after stdin EOF or SIGTERM every session's final
// proof is in its key's journal as a cleanup/proof entry, logged on one
// info line, and sent as cleanup/proof to a host still reading; a new
// host on the same stateDir finds it with session/events. A requested
// shutdown journals its proofs too, but sends them only in its result.

import (
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proofEvents are the cleanup/proof entries of events, decoded.
func proofEvents(t *testing.T, events []journalEvent) []proof {
	t.Helper()
	var out []proof
	for _, ev := range events {
		if ev.Method != "cleanup/proof" {
			continue
		}
		var n struct {
			Proof proof `json:"proof"`
		}
		if err := json.Unmarshal(ev.Params, &n); err != nil {
			t.Fatalf("journal cleanup/proof params %s: %v", ev.Params, err)
		}
		out = append(out, n.Proof)
	}
	return out
}

// wantShutdownProofJournaled reads key's journal through a new sidecar on
// stateDir and requires exactly one cleanup/proof of session: origin
// shutdown, complete, listing the provider; it returns that proof.
func wantShutdownProofJournaled(t *testing.T, e *faultEnv, key, session string, provider int) proof {
	t.Helper()
	s2 := startSidecar(t, seedArgs(e)...)
	s2.initialize(false)
	events, _ := readEvents(t, s2, key, "", 0, 0)
	var mine []proof
	for _, p := range proofEvents(t, events) {
		if p.Session == session {
			mine = append(mine, p)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("journal of %q holds %d cleanup/proof entries of %s, want 1: %+v", key, len(mine), session, mine)
	}
	p := mine[0]
	if !p.Complete || p.Origin != "shutdown" || p.SessionKey != key {
		t.Errorf("journaled proof: complete %v origin %q key %q, want a complete shutdown proof of %q", p.Complete, p.Origin, p.SessionKey, key)
	}
	found := false
	for _, pr := range p.Processes {
		found = found || pr.Pid == provider
	}
	if !found {
		t.Errorf("journaled proof does not list the provider pid %d: %+v", provider, p.Processes)
	}
	if last := events[len(events)-1]; last.Method != "cleanup/proof" {
		t.Errorf("last journal entry is %s, want the shutdown's cleanup/proof", last.Method)
	}
	if _, status := s2.shutdownAndExit(); status != 0 {
		t.Errorf("reader sidecar exit status %d", status)
	}
	return p
}

// wantProofLogged requires the one info line of p in the sidecar's log.
func wantProofLogged(t *testing.T, s *sidecar, p proof) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(s.stderrText(), "\n") {
		if strings.Contains(line, "shutdown proof") && strings.Contains(line, p.CleanupID) {
			n++
			if !strings.Contains(line, `"complete":true`) || !strings.Contains(line, p.SessionKey) ||
				!strings.Contains(line, `"processes":`+strconv.Itoa(len(p.Processes))) {
				t.Errorf("log line without complete, sessionKey or process count: %s", line)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d log lines for shutdown proof %s, want 1; stderr:\n%s", n, p.CleanupID, s.stderrText())
	}
}

// TestShutdownProofs_HostDiesMidTurn: the host goes away (stdin EOF) in the
// middle of a turn; the new host finds the shutdown's complete proof in
// the key's journal. The old host, still reading, was sent it too.
func TestShutdownProofs_HostDiesMidTurn(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := e.open(s, "host-gone", "stream=400:5")
	s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "go"})
	waitSeq(s, 5)
	_ = s.stdin.Close()
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("sidecar did not exit after stdin EOF")
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	p := wantShutdownProofJournaled(t, e, "host-gone", o.Session, o.Process.Pid)
	wantProofLogged(t, s, p)
	sent := seedProofNotes(s, o.Session)
	if len(sent) != 1 || sent[0].CleanupID != p.CleanupID {
		t.Errorf("cleanup/proof notifications of %s after stdin EOF: %+v, want the journaled one", o.Session, sent)
	}
}

// TestShutdownProofs_SIGTERM: a SIGTERM shutdown journals, logs and sends
// each session's proof; a requested shutdown journals its proofs but sends
// them only in its result.
func TestShutdownProofs_SIGTERM(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := e.open(s, "term-1", "normal")
	runTurn(t, s, o.Session, "t1", "go")
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("sidecar did not exit after SIGTERM")
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	p := wantShutdownProofJournaled(t, e, "term-1", o.Session, o.Process.Pid)
	wantProofLogged(t, s, p)
	if sent := seedProofNotes(s, o.Session); len(sent) != 1 {
		t.Errorf("%d cleanup/proof notifications after SIGTERM, want 1", len(sent))
	}

	s3 := startSidecar(t, seedArgs(e)...)
	s3.initialize(false)
	o3 := e.open(s3, "asked-1", "normal")
	runTurn(t, s3, o3.Session, "t1", "go") // an update, so session/events pages end
	proofs, status := s3.shutdownAndExit()
	if status != 0 || len(proofs) != 1 {
		t.Fatalf("requested shutdown: status %d, proofs %+v", status, proofs)
	}
	if sent := seedProofNotes(s3, o3.Session); len(sent) != 0 {
		t.Errorf("a requested shutdown also sent %d cleanup/proof notifications", len(sent))
	}
	if jp := wantShutdownProofJournaled(t, e, "asked-1", o3.Session, o3.Process.Pid); jp.CleanupID != proofs[0].CleanupID {
		t.Errorf("journaled proof %s, shutdown result's %s", jp.CleanupID, proofs[0].CleanupID)
	}
}
