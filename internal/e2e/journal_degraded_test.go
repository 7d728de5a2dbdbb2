package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// journalNote is a session/journal notification.
type journalNote struct {
	Session  string `json:"session"`
	State    string `json:"state"`
	File     string `json:"file"`
	Error    string `json:"error"`
	SinceSeq uint64 `json:"sinceSeq"`
	Gap      *nGap  `json:"gap"`
}

func journalNotes(s *sidecar, session string) []journalNote {
	var out []journalNote
	for _, f := range s.notesOf("session/journal") {
		var n journalNote
		if json.Unmarshal(f.Params, &n) == nil && n.Session == session {
			out = append(out, n)
		}
	}
	return out
}

// smallTmpfs mounts a tmpfs of size on a new directory (root only),
// filled by a ballast file so that only free bytes are left; release
// removes the ballast. It is unmounted at cleanup (register it before the
// sidecar).
func smallTmpfs(t *testing.T, size string, free int64) (dir string, release func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir = t.TempDir()
	if err := mountTmpfs(dir, "size="+size+",mode=0700"); err != nil {
		t.Fatalf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unmountTmpfs(dir); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	ballast := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(ballast, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the tmpfs: %v", err)
			}
			break
		}
	}
	st, _ := f.Stat()
	if err := f.Truncate(st.Size() - free); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return dir, func() {
		t.Helper()
		if err := os.Remove(ballast); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJournal_FullDiskDegradesAndRecovers (docs/protocol.md §16, "Gaps and
// degraded writes"): with the state dir on a small tmpfs, a flood turn
// fills it. The host gets session/journal degraded, every update still
// arrives live, session/status says persistence.journal degraded, and
// session/events reports the gap with complete false. Space freed, the
// next turn gets state ok with the gap, a journal/gap entry precedes the
// entries that follow, appends resume (complete after the gap), and a new
// sidecar reading the key sees the same gap.
func TestJournal_FullDiskDegradesAndRecovers(t *testing.T) {
	e := newFaultEnv(t)
	state, release := smallTmpfs(t, "4m", 256<<10)
	s := startSidecar(t, seedArgs(e, "--state-dir", state)...)
	s.initialize(false)
	p := e.openParams("full", "flood=3000")
	p["stateDir"] = state
	var o openResult
	s.mustCall("session/open", p, &o)

	runTurn(t, s, o.Session, "t1", "flood")
	ups := updatesOf(s, o.Session)
	for i, u := range ups {
		if u.Seq != uint64(i+1) {
			t.Fatalf("live update %d has seq %d: updates were lost on the wire", i, u.Seq)
		}
	}
	if len(ups) < 3000 {
		t.Fatalf("%d live updates, want the whole flood (3000+)", len(ups))
	}
	notes := journalNotes(s, o.Session)
	if len(notes) == 0 || notes[0].State != "degraded" || notes[0].File != "journal" || !strings.Contains(notes[0].Error, "ENOSPC") || notes[0].SinceSeq == 0 {
		t.Fatalf("session/journal notes %+v, want degraded journal ENOSPC first", notes)
	}
	var st struct {
		Persistence struct {
			Journal string `json:"journal"`
			Record  string `json:"record"`
		} `json:"persistence"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.Persistence.Journal != "degraded" {
		t.Errorf("status persistence %+v, want journal degraded", st.Persistence)
	}
	all, gaps, complete := readByN(t, s, "full", state, 0, 1000)
	if complete || len(gaps) == 0 {
		t.Fatalf("while degraded: complete %v gaps %+v (of %d entries), want the gap reported", complete, gaps, len(all))
	}

	release()
	runTurn(t, s, o.Session, "t2", "after")
	var ok *journalNote
	for _, n := range journalNotes(s, o.Session) {
		if n.State == "ok" && n.File == "journal" {
			n := n
			ok = &n
		}
	}
	if ok == nil || ok.Gap == nil || ok.Gap.FromN == 0 || ok.Gap.ToN < ok.Gap.FromN {
		t.Fatalf("no session/journal ok with the gap after space was freed: %+v", journalNotes(s, o.Session))
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.Persistence.Journal != "ok" || st.Persistence.Record != "ok" {
		t.Errorf("status persistence %+v after recovery, want ok", st.Persistence)
	}
	all, gaps, complete = readByN(t, s, "full", state, 0, 1000)
	if complete || len(gaps) != 1 || gaps[0].FromN != ok.Gap.FromN || gaps[0].ToN != ok.Gap.ToN || !strings.Contains(gaps[0].Reason, "ENOSPC") {
		t.Fatalf("after recovery: complete %v gaps %+v, want exactly the gap %+v", complete, gaps, ok.Gap)
	}
	gapAt := -1
	for i, ev := range all {
		if ev.Method == "journal/gap" {
			gapAt = i
			if ev.N != ok.Gap.ToN+1 {
				t.Errorf("gap entry n %d, want %d (right after the lost ones)", ev.N, ok.Gap.ToN+1)
			}
		}
	}
	if gapAt < 0 {
		t.Fatalf("no journal/gap entry among %d entries", len(all))
	}
	var t2 int
	for _, ev := range all[gapAt+1:] {
		if ev.Method == "session/update" && ev.Seq > uint64(len(ups)) {
			t2++
		}
	}
	if t2 == 0 {
		t.Errorf("no update of turn t2 journaled after the gap entry")
	}
	_, gapsAfter, completeAfter := readByN(t, s, "full", state, all[gapAt].N, 1000)
	if !completeAfter || len(gapsAfter) != 0 {
		t.Errorf("after the gap entry: complete %v gaps %+v, want complete", completeAfter, gapsAfter)
	}
	closeProof(s, o.Session, nil)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}

	s2 := startSidecar(t, seedArgs(e, "--state-dir", state)...)
	s2.initialize(false)
	_, gaps2, complete2 := readByN(t, s2, "full", state, 0, 1000)
	if complete2 || len(gaps2) != 1 || gaps2[0] != gaps[0] {
		t.Errorf("a new sidecar reads gaps %+v complete %v, want %+v", gaps2, complete2, gaps)
	}
	if _, status := s2.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
