package e2e

// The session journal and session/events (docs/protocol.md §16): every
// notification of a session is on disk before its frame reaches the host,
// so a host that dies — or whose sidecar is SIGKILLed — mid-turn catches
// up from a new sidecar on the same stateDir: every update after the last
// seq it saw, in order, none twice. Rotation bounds the journal; secrets
// never reach it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// journalEvent is one session/events entry.
type journalEvent struct {
	Seq    uint64          `json:"seq"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	At     string          `json:"at"`
}

type eventsPage struct {
	Events    []journalEvent `json:"events"`
	NextSeq   uint64         `json:"nextSeq"`
	Truncated bool           `json:"truncated"`
}

// readEvents pages through session/events of key after afterSeq until a
// page is empty.
func readEvents(t *testing.T, s *sidecar, key, stateDir string, afterSeq uint64, limit int) (all []journalEvent, truncated bool) {
	t.Helper()
	for pages := 0; ; pages++ {
		var p eventsPage
		params := map[string]any{"sessionKey": key, "afterSeq": afterSeq}
		if stateDir != "" {
			params["stateDir"] = stateDir
		}
		if limit > 0 {
			params["limit"] = limit
		}
		s.mustCall("session/events", params, &p)
		truncated = truncated || p.Truncated
		if len(p.Events) == 0 {
			if p.NextSeq != afterSeq {
				t.Errorf("empty page has nextSeq %d, want %d", p.NextSeq, afterSeq)
			}
			return all, truncated
		}
		all = append(all, p.Events...)
		if p.NextSeq != p.Events[len(p.Events)-1].Seq {
			t.Fatalf("nextSeq %d is not the last event's seq %d", p.NextSeq, p.Events[len(p.Events)-1].Seq)
		}
		afterSeq = p.NextSeq
		if pages > 100000 {
			t.Fatal("session/events never ends")
		}
	}
}

// journalUpdates are the session/update entries of events, decoded.
func journalUpdates(t *testing.T, events []journalEvent) []updateNote {
	t.Helper()
	var out []updateNote
	for _, e := range events {
		if e.Method != "session/update" {
			continue
		}
		var u updateNote
		if err := json.Unmarshal(e.Params, &u); err != nil {
			t.Fatalf("journal update params %s: %v", e.Params, err)
		}
		if u.Seq != e.Seq {
			t.Fatalf("journal entry seq %d carries an update with seq %d", e.Seq, u.Seq)
		}
		out = append(out, u)
	}
	return out
}

// waitSeq waits until the host has an update with seq ≥ n.
func waitSeq(s *sidecar, n uint64) {
	s.t.Helper()
	s.waitNote("session/update", 20*time.Second, func(p json.RawMessage) bool {
		var u updateNote
		return json.Unmarshal(p, &u) == nil && u.Seq >= n
	})
}

func maxSeq(ups []updateNote) uint64 {
	var m uint64
	for _, u := range ups {
		if u.Seq > m {
			m = u.Seq
		}
	}
	return m
}

// wantCatchUp checks that journal holds, after lastSeen, every update
// sent holds after lastSeen, in order, none twice, with the same content;
// exact: the journal may hold nothing more (the host read to the end).
func wantCatchUp(t *testing.T, sent, journal []updateNote, lastSeen uint64, exact bool) {
	t.Helper()
	var want []updateNote
	for _, u := range sent {
		if u.Seq > lastSeen {
			want = append(want, u)
		}
	}
	if len(want) == 0 {
		t.Fatal("the old sidecar sent no update after the host's last seq: the test proves nothing")
	}
	seen := map[uint64]bool{}
	for i, u := range journal {
		if seen[u.Seq] {
			t.Fatalf("seq %d twice in session/events", u.Seq)
		}
		seen[u.Seq] = true
		if u.Seq != lastSeen+uint64(i)+1 {
			t.Fatalf("session/events update %d has seq %d, want %d (gap or reorder)", i, u.Seq, lastSeen+uint64(i)+1)
		}
	}
	if len(journal) < len(want) || (exact && len(journal) != len(want)) {
		t.Fatalf("session/events has %d updates after seq %d, the old sidecar sent %d", len(journal), lastSeen, len(want))
	}
	for i, u := range want {
		if !sameJSON(u.Update, journal[i].Update) || u.RequestID == nil || journal[i].RequestID == nil || *u.RequestID != *journal[i].RequestID {
			t.Fatalf("update seq %d differs: sent %s, journal %s", u.Seq, u.Update, journal[i].Update)
		}
	}
}

// TestJournal_HostDiesMidTurn_NewHostCatchesUp: the host goes away (stdin
// EOF) in the middle of a slowly streaming turn; its sidecar shuts down.
// A new host and sidecar on the same stateDir read session/events after
// the last seq the old host had seen and get exactly every update the old
// sidecar sent after it, in order, none twice.
func TestJournal_HostDiesMidTurn_NewHostCatchesUp(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := e.open(s, "host-dies", "stream=400:5")
	s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "go"})
	waitSeq(s, 20)
	lastSeen := maxSeq(updatesOf(s, o.Session)) // what the host had processed when it died
	waitSeq(s, lastSeen+20)
	_ = s.stdin.Close()
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("sidecar did not exit after stdin EOF")
	}
	sent := updatesOf(s, o.Session) // everything the old sidecar wrote
	waitNoMarked(t, e.mark, e.work, 10*time.Second)

	s2 := startSidecar(t, seedArgs(e)...)
	s2.initialize(false)
	events, truncated := readEvents(t, s2, "host-dies", e.stateDir, lastSeen, 7)
	if truncated {
		t.Error("truncated without rotation")
	}
	wantCatchUp(t, sent, journalUpdates(t, events), lastSeen, true)
	// The start too: after 0 the journal holds every update sent.
	all, _ := readEvents(t, s2, "host-dies", "", 0, 0)
	wantCatchUp(t, sent, journalUpdates(t, all), 0, true)
	if _, status := s2.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}

// TestJournal_SidecarKilledMidTurn_NewHostCatchesUp: the sidecar itself is
// SIGKILLed mid-turn. Every update that reached the host's pipe was in
// the journal first: a new sidecar serves all of them after the host's
// last seq, in order, none twice (the journal may hold a few more that
// never reached the pipe); the recovered proof of the killed session's
// leftovers is journaled too; the record names the cut turn as its last
// request.
func TestJournal_SidecarKilledMidTurn_NewHostCatchesUp(t *testing.T) {
	startOrphanReaper(t)
	stateDir, cwd := t.TempDir(), t.TempDir()
	mark := testmark.New()
	killMarkedOnCleanup(t, mark)
	s := startSidecar(t, "--state-dir", stateDir)
	trackChild(s.cmd.Process.Pid)
	s.initialize(false)
	o := openFault(t, s, "sidecar-killed", cwd, mark, "stream=400:5")
	s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "go"})
	waitSeq(s, 20)
	lastSeen := maxSeq(updatesOf(s, o.Session))
	waitSeq(s, lastSeen+20)
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.exited
	sent := updatesOf(s, o.Session) // every frame that reached the pipe
	waitNoMarked(t, mark, cwd, 10*time.Second)
	// The turn the kill cut short is the record's last request (a resumed
	// session's lastRequestId; docs/protocol.md §8 session/status).
	if rec := seedReadJSON(t, filepath.Join(stateDir, "sessions", "sidecar-killed.json")); rec["last_request_id"] != "t1" {
		t.Errorf("record last_request_id %v after a kill mid-turn, want t1", rec["last_request_id"])
	}

	s2 := startSidecar(t, "--state-dir", stateDir)
	trackChild(s2.cmd.Process.Pid)
	s2.initialize(false)
	s2.waitNote("cleanup/proof", 10*time.Second, func(p json.RawMessage) bool {
		var rp recoveredProof
		return json.Unmarshal(p, &rp) == nil && rp.Proof.SessionKey == "sidecar-killed" && rp.Proof.Origin == "recovered"
	})
	events, _ := readEvents(t, s2, "sidecar-killed", "", lastSeen, 0)
	wantCatchUp(t, sent, journalUpdates(t, events), lastSeen, false)
	last := events[len(events)-1]
	var rp recoveredProof
	if last.Method != "cleanup/proof" || json.Unmarshal(last.Params, &rp) != nil || rp.Proof.Origin != "recovered" {
		t.Errorf("last journal entry %s %s, want the recovered cleanup/proof", last.Method, last.Params)
	}
	if journal := journalUpdates(t, events); last.Seq != journal[len(journal)-1].Seq {
		t.Errorf("the proof's seq %d is not the last update's %d", last.Seq, journal[len(journal)-1].Seq)
	}
	// The SIGKILL tore at most the last line: n stays gap-free across the
	// two sidecars (the new one numbers on from the last whole entry).
	byN, gaps, complete := readByN(t, s2, "sidecar-killed", "", 0, 1000)
	if !complete || len(gaps) != 0 {
		t.Errorf("by n after a SIGKILL: complete %v gaps %+v", complete, gaps)
	}
	for i, ev := range byN {
		if ev.N != uint64(i+1) {
			t.Fatalf("entry %d has n %d after a SIGKILL, want %d", i, ev.N, i+1)
		}
	}
	if _, status := s2.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}

// TestJournal_LiveSessionAndSecrets: a live session's session/events is
// every notification the host received for it — updates with their seq,
// permission audits, the request the host was asked, the provider's exit,
// its cleanup proof — in the order they were sent; an env secret of the
// open appears in no journal file; a reopened key's session starts at seq 1
// and a read by seq (afterSeq) serves the latest session only — the
// earlier one is kept (TestJournal_ReopenKeepsEverySession; docs/protocol.md
// §6, §16).
func TestJournal_LiveSessionAndSecrets(t *testing.T) {
	const secret = "journal-secret-value-7f3e"
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.onRequest = func(f *frame) any { return map[string]string{"outcome": "cancelled"} }
	s.initialize(true)
	p := e.openParams("live", "permission=execute")
	p["env"].(map[string]string)["SECRET_TOKEN"] = secret
	p["permissionMode"] = "approve-reads"
	p["permissionPolicy"] = map[string]any{"escalate": []string{"execute"}}
	o := decodeResult[openResult](t, "open", s.call("session/open", p))
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "go"}, nil)
	// The provider dies on its own: session/exited, then the cleanup's proof.
	if err := syscall.Kill(o.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.waitNote("cleanup/proof", 20*time.Second, func(raw json.RawMessage) bool {
		var n struct {
			Proof proof `json:"proof"`
		}
		return json.Unmarshal(raw, &n) == nil && n.Proof.Session == o.Session
	})
	events, _ := readEvents(t, s, "live", "", 0, 0)
	var hostSaw []string // notifications and requests, in wire order
	seedFrameIndex(s, func(f *frame) bool {
		if f.Method != "" {
			hostSaw = append(hostSaw, f.Method)
		}
		return false
	})
	var journaled []string
	for _, ev := range events {
		journaled = append(journaled, ev.Method)
	}
	if fmt.Sprint(journaled) != fmt.Sprint(hostSaw) {
		t.Errorf("journal methods %v\nhost received %v", journaled, hostSaw)
	}
	for _, want := range []string{"session/update", "session/permission", "session/requestPermission", "session/exited", "cleanup/proof"} {
		if !contains(journaled, want) {
			t.Errorf("journal has no %s entry: %v", want, journaled)
		}
	}
	closeProof(s, o.Session, nil)

	// Reopen the key: the new session's seq starts at 1, and the key's
	// journal now holds that session only.
	p2 := e.openParams("live", "normal")
	p2["resume"] = false
	var o2 openResult
	s.mustCall("session/open", p2, &o2)
	s.mustCall("session/prompt", map[string]any{"session": o2.Session, "requestId": "t2", "prompt": "go"}, nil)
	ups := updatesOf(s, o2.Session)
	if len(ups) == 0 || ups[0].Seq != 1 {
		t.Fatalf("reopened key's first update seq %v, want 1", ups)
	}
	again, _ := readEvents(t, s, "live", "", 0, 0)
	if len(again) == 0 {
		t.Fatal("reopened key's journal is empty")
	}
	for _, ev := range again {
		if !bytes.Contains(ev.Params, []byte(o2.Session)) {
			t.Fatalf("reopened key's journal holds an entry of another session: %s %s", ev.Method, ev.Params)
		}
	}
	closeProof(s, o2.Session, nil)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	names, _ := filepath.Glob(filepath.Join(e.stateDir, "sessions", "live.journal*.ndjson"))
	if len(names) != 1 {
		t.Fatalf("journal files %v", names)
	}
	b, _ := os.ReadFile(names[0])
	if len(b) == 0 {
		t.Fatal("journal file empty")
	}
	grepSecret(t, secret, e.stateDir, s.allOutput())
}

// TestJournal_RotationKeepsFourSegments: with --journal-max-bytes 4096 a
// long turn rotates the journal: at most four segment files, named
// <key>.journal.ndjson and .1–.3; reading from the start says truncated;
// the entries kept are the newest, gap-free to the last update sent.
func TestJournal_RotationKeepsFourSegments(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e, "--journal-max-bytes", "4096")...)
	s.initialize(false)
	o := e.open(s, "rot", "flood=400")
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "go"}, nil)
	sent := updatesOf(s, o.Session)
	names, _ := filepath.Glob(filepath.Join(e.stateDir, "sessions", "rot.journal*"))
	wantNames := map[string]bool{"rot.journal.ndjson": true, "rot.journal.1.ndjson": true, "rot.journal.2.ndjson": true, "rot.journal.3.ndjson": true}
	if len(names) != 4 {
		t.Fatalf("segment files %v, want 4", names)
	}
	for _, n := range names {
		if !wantNames[filepath.Base(n)] {
			t.Errorf("unexpected segment file %s", n)
		}
		if fi, _ := os.Stat(n); fi.Size() > 4096+1024 {
			t.Errorf("segment %s is %d bytes, rotated at 4096", n, fi.Size())
		}
	}
	events, truncated := readEvents(t, s, "rot", "", 0, 0)
	if !truncated {
		t.Error("reading from the start of a rotated journal is not truncated")
	}
	ups := journalUpdates(t, events)
	if len(ups) == 0 || ups[len(ups)-1].Seq != maxSeq(sent) {
		t.Fatalf("journal ends at %d, last update sent %d", maxSeq(ups), maxSeq(sent))
	}
	for i := 1; i < len(ups); i++ {
		if ups[i].Seq != ups[i-1].Seq+1 {
			t.Fatalf("gap %d → %d", ups[i-1].Seq, ups[i].Seq)
		}
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestJournal_EntryOnDiskBeforeItsFrame: each time the host has received
// update n, the journal file already holds update n (the entry reached the
// kernel before its frame reached the pipe), checked for every update of a
// paced turn.
func TestJournal_EntryOnDiskBeforeItsFrame(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	o := e.open(s, "ordered", "stream=40:3")
	id := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "go"})
	path := filepath.Join(e.stateDir, "sessions", "ordered.journal.ndjson")
	for n := uint64(1); n <= 40; n++ {
		waitSeq(s, n)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var last uint64
		for _, line := range bytesLines(b) {
			var ev journalEvent
			if json.Unmarshal(line, &ev) == nil && ev.Method == "session/update" {
				last = ev.Seq
			}
		}
		if last < n {
			t.Fatalf("the host has update %d, the journal on disk ends at %d", n, last)
		}
	}
	s.await(id, 20*time.Second)
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// bytesLines splits b into its complete lines.
func bytesLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		out = append(out, b[:i])
		b = b[i+1:]
	}
	return out
}
