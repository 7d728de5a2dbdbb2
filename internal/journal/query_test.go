package journal

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type nEntry struct {
	N       uint64          `json:"n"`
	Session string          `json:"session"`
	Seq     uint64          `json:"seq"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

func decodeN(t *testing.T, p Page) []nEntry {
	t.Helper()
	out := make([]nEntry, len(p.Events))
	for i, e := range p.Events {
		if err := json.Unmarshal(e, &out[i]); err != nil {
			t.Fatalf("event %d %q: %v", i, e, err)
		}
	}
	return out
}

// TestJournal_EverySessionOfAKey: three sessions of one key, each opened
// by a new Journal (as a reopen or a new sidecar does), share one n
// numbering from 1 with no gaps; by n a reader gets all three in order
// with their seqs and session ids, page by page; by seq it gets the latest
// session or the one it names.
func TestJournal_EverySessionOfAKey(t *testing.T) {
	dir := t.TempDir()
	for s, id := range []string{"s-a", "s-b", "s-c"} {
		j, err := Open(dir, "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		j.AppendNoticeOf(id, 0, "session/history", []byte(`{"session":"`+id+`"}`))
		for seq := uint64(1); seq <= 3; seq++ {
			j.AppendUpdateOf(id, seq, updateParams(seq))
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		_ = s
	}
	var all []nEntry
	after := uint64(0)
	for {
		p, err := QueryDir(dir, "k", Query{AfterN: after, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		if !p.Complete || len(p.Gaps) != 0 {
			t.Fatalf("page after %d: complete %v gaps %v", after, p.Complete, p.Gaps)
		}
		if len(p.Events) == 0 {
			break
		}
		all = append(all, decodeN(t, p)...)
		after = p.NextN
	}
	if len(all) != 12 {
		t.Fatalf("%d entries, want 12", len(all))
	}
	for i, e := range all {
		wantSession := []string{"s-a", "s-b", "s-c"}[i/4]
		if e.N != uint64(i+1) || e.Session != wantSession || e.Seq != uint64(i%4) {
			t.Fatalf("entry %d = n %d session %s seq %d", i, e.N, e.Session, e.Seq)
		}
	}
	p, _ := QueryDir(dir, "k", Query{BySeq: true, AfterSeq: 1})
	if es := decodeN(t, p); len(es) != 2 || es[0].Session != "s-c" || es[0].Seq != 2 {
		t.Fatalf("latest session after seq 1: %+v", es)
	}
	p, _ = QueryDir(dir, "k", Query{BySeq: true, Session: "s-a"})
	if es := decodeN(t, p); len(es) != 4 || es[3].N != 4 {
		t.Fatalf("session s-a: %+v", es)
	}
}

// TestJournal_LegacyJournalReadAndContinued: a journal written before n
// (lines {"seq",…} first) reads with n by place and its session from the
// params; a sidecar of this version appends to it numbering on, and the
// legacy entries keep their numbers.
func TestJournal_LegacyJournalReadAndContinued(t *testing.T) {
	dir := t.TempDir()
	path := SegmentPath(dir, Stem("old"), 0)
	var b []byte
	for seq := 1; seq <= 3; seq++ {
		b = append(b, `{"seq":`+string(rune('0'+seq))+`,"method":"session/update","params":`+string(updateParams(uint64(seq)))+`,"at":"2026-01-01T00:00:00.000000000Z"}`+"\n"...)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := QueryDir(dir, "old", Query{})
	if err != nil {
		t.Fatal(err)
	}
	es := decodeN(t, p)
	if len(es) != 3 || es[0].N != 1 || es[2].N != 3 || es[0].Session != "s-1" || !p.Complete {
		t.Fatalf("legacy read: %+v complete %v", es, p.Complete)
	}
	if p, _ := ReadDir(dir, "old", 1, 0); len(p.Events) != 2 {
		t.Fatalf("legacy read by seq: %d events", len(p.Events))
	}
	j, err := Open(dir, "old", 0)
	if err != nil {
		t.Fatal(err)
	}
	j.AppendUpdateOf("s-new", 1, updateParams(1))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	p, _ = QueryDir(dir, "old", Query{AfterN: 2})
	es = decodeN(t, p)
	if len(es) != 2 || es[0].N != 3 || es[1].N != 4 || es[1].Session != "s-new" || !p.Complete {
		t.Fatalf("after n 2: %+v complete %v gaps %v", es, p.Complete, p.Gaps)
	}
}

// TestJournal_DegradedWritesAGap: a write that fails degrades the journal
// (Flush errors, Health says so, a live Query reports the lost n's and
// complete false); appends meanwhile are counted, not kept; once writes
// work the first entry written is a gap entry naming the lost n's, then
// appends resume, and a reader from disk sees the same gap.
func TestJournal_DegradedWritesAGap(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, "d", 0)
	if err != nil {
		t.Fatal(err)
	}
	j.AppendUpdateOf("s-1", 1, updateParams(1))
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	good := j.f
	ro, err := os.Open(SegmentPath(dir, Stem("d"), 0))
	if err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	j.f = ro // writes now fail (EBADF)
	j.mu.Unlock()
	j.AppendUpdateOf("s-1", 2, updateParams(2))
	if err := j.Flush(); err == nil {
		t.Fatal("a failing write was not reported")
	}
	j.AppendUpdateOf("s-1", 3, updateParams(3))
	if err := j.Flush(); err == nil || !j.Health().Degraded || j.Health().SinceSeq != 2 {
		t.Fatalf("retry: %v, health %+v", err, j.Health())
	}
	p, _ := j.Query(Query{})
	if p.Complete || len(p.Gaps) != 1 || p.Gaps[0].FromN != 2 {
		t.Fatalf("live read while degraded: complete %v gaps %+v", p.Complete, p.Gaps)
	}
	j.mu.Lock()
	j.f = good
	j.mu.Unlock()
	ro.Close()
	if err := j.Flush(); err != nil {
		t.Fatalf("recovery flush: %v", err)
	}
	// n 2 and 3 were lost, and the n of each failed retry's gap entry.
	h := j.Health()
	if h.Degraded || h.LastGap.FromN != 2 || h.LastGap.ToN < 4 {
		t.Fatalf("after recovery: %+v", h)
	}
	to := h.LastGap.ToN
	j.AppendUpdateOf("s-1", 4, updateParams(4))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	p, _ = QueryDir(dir, "d", Query{})
	es := decodeN(t, p)
	if len(es) != 3 || es[1].Method != MethodGap || es[1].N != to+1 || es[2].N != to+2 || es[2].Seq != 4 {
		t.Fatalf("entries: %+v", es)
	}
	if p.Complete || len(p.Gaps) != 1 || p.Gaps[0].FromN != 2 || p.Gaps[0].ToN != to || p.Gaps[0].Reason == "missing" {
		t.Fatalf("gaps from disk: %+v complete %v", p.Gaps, p.Complete)
	}
	if p, _ := QueryDir(dir, "d", Query{AfterN: to + 1}); !p.Complete || len(p.Events) != 1 {
		t.Fatalf("after the gap: %+v", p)
	}
}

// TestJournal_BySeqPagingEndsWhenSeqZeroIsLong: a session whose entries
// before its first update (seq 0: replayed history, say) outnumber the
// limit is still paged through by seq, each entry once and in order: a
// page does not end on seq 0 (afterSeq 0 would restart the read).
func TestJournal_BySeqPagingEndsWhenSeqZeroIsLong(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		j.AppendNoticeOf("s-a", 0, "session/history", []byte(`{"session":"s-a"}`))
	}
	for seq := uint64(1); seq <= 3; seq++ {
		j.AppendUpdateOf("s-a", seq, updateParams(seq))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	var got []nEntry
	after := uint64(0)
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatalf("still paging after %d pages: %d entries so far", pages, len(got))
		}
		p, err := QueryDir(dir, "k", Query{BySeq: true, AfterSeq: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Events) == 0 {
			break
		}
		got = append(got, decodeN(t, p)...)
		after = p.NextSeq
	}
	if len(got) != 9 {
		t.Fatalf("%d entries, want 9", len(got))
	}
	for i, e := range got {
		if e.N != uint64(i+1) {
			t.Fatalf("entry %d has n %d: not every entry once, in order", i, e.N)
		}
	}
}

// TestJournal_BySeqReadReportsMissingNumbers: an entry missing from the
// file (its n skipped) inside a read by seq's range is a gap, and the
// read is not complete; one after the page's last entry is not the page's.
func TestJournal_BySeqReadReportsMissingNumbers(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 4; seq++ {
		j.AppendUpdateOf("s-a", seq, updateParams(seq))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, Stem("k")+".journal.ndjson")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(path, []byte(lines[0]+strings.Join(lines[2:], "")), 0o600); err != nil { // n 2 lost
		t.Fatal(err)
	}
	p, err := QueryDir(dir, "k", Query{BySeq: true, Session: "s-a"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Complete || len(p.Gaps) != 1 || p.Gaps[0].FromN != 2 || p.Gaps[0].ToN != 2 || p.Gaps[0].Reason != "missing" {
		t.Fatalf("complete %v gaps %+v, want n 2 missing", p.Complete, p.Gaps)
	}
	p, _ = QueryDir(dir, "k", Query{BySeq: true, Session: "s-a", AfterSeq: 2})
	if !p.Complete || len(p.Gaps) != 0 {
		t.Fatalf("after seq 2: complete %v gaps %+v, want complete", p.Complete, p.Gaps)
	}
}

// TestJournal_GapBeforeTheFirstEntryKeepsItsReason: when the very first
// writes fail (a state dir full from the start), the journal's first entry
// is the gap entry, and a reader names the gap entry's reason, not
// "missing" (found by a fresh-user trial on a full tmpfs).
func TestJournal_GapBeforeTheFirstEntryKeepsItsReason(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, "f", 0)
	if err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	good := j.f
	j.mu.Unlock()
	ro, err := os.Open(SegmentPath(dir, Stem("f"), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	j.mu.Lock()
	j.f = ro // writes fail from the first one
	j.mu.Unlock()
	j.AppendUpdateOf("s-1", 1, updateParams(1))
	j.AppendUpdateOf("s-1", 2, updateParams(2))
	if err := j.Flush(); err == nil {
		t.Fatal("a failing write was not reported")
	}
	j.mu.Lock()
	j.f = good
	j.mu.Unlock()
	if err := j.Flush(); err != nil {
		t.Fatalf("recovery flush: %v", err)
	}
	reason := j.Health().LastGap.Reason
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for _, after := range []uint64{0, 1} {
		p, _ := QueryDir(dir, "f", Query{AfterN: after})
		if p.Complete || len(p.Gaps) != 1 || p.Gaps[0].FromN != after+1 || p.Gaps[0].Reason != reason || reason == "missing" || reason == "" {
			t.Errorf("afterN %d: gaps %+v complete %v, want one from %d with reason %q", after, p.Gaps, p.Complete, after+1, reason)
		}
	}
}
