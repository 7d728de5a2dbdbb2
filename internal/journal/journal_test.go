package journal

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type entry struct {
	Seq    uint64          `json:"seq"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	At     string          `json:"at"`
}

func decode(t *testing.T, p Page) []entry {
	t.Helper()
	out := make([]entry, len(p.Events))
	for i, e := range p.Events {
		if err := json.Unmarshal(e, &out[i]); err != nil {
			t.Fatalf("event %d %q: %v", i, e, err)
		}
	}
	return out
}

func updateParams(seq uint64) []byte {
	return []byte(fmt.Sprintf(`{"session":"s-1","requestId":"t1","seq":%d,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"u%d"}}}`, seq, seq))
}

// TestJournal_AppendFlushRead: entries reach the file only at Flush, read
// back in order with the shape of docs/protocol.md §16; a notice carries
// the last update's seq; afterSeq pages neither repeat nor skip.
func TestJournal_AppendFlushRead(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, "run 1/é", 0)
	if err != nil {
		t.Fatal(err)
	}
	j.AppendNotice("session/permission", []byte(`{"n":0}`))
	for seq := uint64(1); seq <= 5; seq++ {
		j.AppendUpdate(seq, updateParams(seq))
		if seq == 3 {
			j.AppendNotice("session/permission", []byte(`{"n":3}`))
		}
	}
	path := SegmentPath(dir, Stem("run 1/é"), 0)
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Fatalf("entries reached the file before Flush: %q", b)
	}
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "run%201%2F%C3%A9.journal.ndjson" {
		t.Fatalf("segment name %q", filepath.Base(path))
	}
	p, err := ReadDir(dir, "run 1/é", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	es := decode(t, p)
	wantSeq := []uint64{0, 1, 2, 3, 3, 4, 5}
	if len(es) != len(wantSeq) || p.NextSeq != 5 || p.Truncated {
		t.Fatalf("got %d events nextSeq %d truncated %v", len(es), p.NextSeq, p.Truncated)
	}
	for i, e := range es {
		if e.Seq != wantSeq[i] || e.At == "" {
			t.Fatalf("event %d = %+v, want seq %d", i, e, wantSeq[i])
		}
	}
	if es[4].Method != "session/permission" || string(es[4].Params) != `{"n":3}` {
		t.Fatalf("notice = %+v", es[4])
	}
	// Pages of 2 after seq 2: [3, 3-notice] then [4, 5] then nothing.
	var seen []uint64
	after := uint64(2)
	for {
		p, err := j.Read(after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Events) == 0 {
			break
		}
		for _, e := range decode(t, p) {
			seen = append(seen, e.Seq)
		}
		after = p.NextSeq
	}
	if fmt.Sprint(seen) != "[3 3 4 5]" {
		t.Fatalf("paged seqs %v", seen)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// A reopened journal continues after the last seq.
	j2, err := Open(dir, "run 1/é", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if j2.LastSeq() != 5 {
		t.Fatalf("LastSeq after reopen = %d", j2.LastSeq())
	}
}

// TestJournal_TornTail: a last line cut by a crash is skipped, and the
// next append starts on a new line.
func TestJournal_TornTail(t *testing.T) {
	dir := t.TempDir()
	j, _ := Open(dir, "k", 0)
	j.AppendUpdate(1, updateParams(1))
	_ = j.Close()
	path := SegmentPath(dir, "k", 0)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString(`{"seq":2,"method":"session/update","params":{"sess`)
	f.Close()
	p, _ := ReadDir(dir, "k", 0, 0)
	if len(p.Events) != 1 {
		t.Fatalf("torn tail read as an event: %d events", len(p.Events))
	}
	j, _ = Open(dir, "k", 0)
	if j.LastSeq() != 1 {
		t.Fatalf("LastSeq = %d, want 1", j.LastSeq())
	}
	j.AppendUpdate(2, updateParams(2))
	_ = j.Close()
	es := decode(t, must(ReadDir(dir, "k", 0, 0)))
	if len(es) != 2 || es[1].Seq != 2 {
		t.Fatalf("after torn tail: %+v", es)
	}
}

func must(p Page, err error) Page {
	if err != nil {
		panic(err)
	}
	return p
}

// TestJournal_Rotation: segments rotate at maxBytes, at most four are
// kept, and a read from before the oldest kept entry says truncated.
func TestJournal_Rotation(t *testing.T) {
	dir := t.TempDir()
	line := int64(len(updateParams(100)) + 100)
	j, _ := Open(dir, "rot", 10*line) // ~10 entries a segment
	for seq := uint64(1); seq <= 100; seq++ {
		j.AppendUpdate(seq, updateParams(seq))
		_ = j.Flush()
	}
	_ = j.Close()
	names, _ := filepath.Glob(filepath.Join(dir, "rot.journal*"))
	if len(names) != Segments {
		t.Fatalf("segments %v, want %d", names, Segments)
	}
	if _, err := os.Stat(SegmentPath(dir, "rot", 3)); err != nil {
		t.Fatal(err)
	}
	all := decode(t, must(ReadDir(dir, "rot", 0, MaxLimit)))
	if all[len(all)-1].Seq != 100 || len(all) > 45 {
		t.Fatalf("kept %d entries ending at %d", len(all), all[len(all)-1].Seq)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq != all[i-1].Seq+1 {
			t.Fatalf("gap %d → %d", all[i-1].Seq, all[i].Seq)
		}
	}
	first := all[0].Seq
	if p := must(ReadDir(dir, "rot", 0, 0)); !p.Truncated {
		t.Fatal("read from the start not truncated")
	}
	if p := must(ReadDir(dir, "rot", first-1, 0)); p.Truncated || len(p.Events) != len(all) {
		t.Fatalf("read from just before the oldest: truncated %v, %d events", p.Truncated, len(p.Events))
	}
	if p := must(ReadDir(dir, "rot", first-2, 0)); !p.Truncated {
		t.Fatal("read from before the oldest not truncated")
	}
}

// TestStem_LongKey: a key too long for segment names gets a hashed stem
// that fits NAME_MAX and differs per key.
func TestStem_LongKey(t *testing.T) {
	a, b := strings.Repeat("é", 60)+"a", strings.Repeat("é", 60)+"b"
	sa, sb := Stem(a), Stem(b)
	if sa == sb || len(filepath.Base(SegmentPath("/", sa, 3))) > 255 {
		t.Fatalf("stems %q %q", sa, sb)
	}
	if Stem("abc") != "abc" {
		t.Fatal("short stem changed")
	}
	dir := t.TempDir()
	j, err := Open(dir, a, 0)
	if err != nil {
		t.Fatal(err)
	}
	j.AppendUpdate(1, updateParams(1))
	_ = j.Close()
	if p := must(ReadDir(dir, a, 0, 0)); len(p.Events) != 1 {
		t.Fatalf("%d events", len(p.Events))
	}
}

// BenchmarkAppendUpdate measures the journal's CPU per forwarded update
// as the session actor spends it: one AppendUpdate per update, one Flush
// (write(2)) per batch of 16 (the frames queued when the actor drains its
// inbox); the bound is 1 µs per update.
func BenchmarkAppendUpdate(b *testing.B) {
	for _, batch := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			j, err := Open(b.TempDir(), "bench", 1<<40)
			if err != nil {
				b.Fatal(err)
			}
			params := updateParams(12345)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j.AppendUpdate(uint64(i+1), params)
				if (i+1)%batch == 0 {
					_ = j.Flush()
				}
			}
			_ = j.Flush()
			b.StopTimer()
			_ = j.Close()
		})
	}
}

// TestJournal_ReserveSkipsNumbers: Reserve writes a gap entry over the
// next count numbers and the following entries go on after them; a
// reader by n reports the gap, and a journal opened again continues after
// it (docs/protocol.md §24: a restored journal's numbers never collide
// with what its previous owner wrote after publishing).
func TestJournal_ReserveSkipsNumbers(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, "moved", 0)
	if err != nil {
		t.Fatal(err)
	}
	j.AppendUpdate(1, updateParams(1))
	if err := j.Reserve(1000, "moved"); err != nil {
		t.Fatal(err)
	}
	j.AppendUpdate(2, updateParams(2))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := QueryDir(dir, "moved", Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Gaps) != 1 || p.Gaps[0].FromN != 2 || p.Gaps[0].ToN != 1001 || p.Gaps[0].Reason != "moved" || p.NextN != 1003 {
		t.Fatalf("gaps %+v next n %d: want 2..1001 reserved, the gap entry 1002, the update 1003", p.Gaps, p.NextN)
	}
	j2, err := Open(dir, "moved", 0)
	if err != nil {
		t.Fatal(err)
	}
	j2.AppendUpdate(3, updateParams(3))
	_ = j2.Close()
	if p, _ := QueryDir(dir, "moved", Query{AfterN: 1003}); p.NextN != 1004 {
		t.Fatalf("a reopened journal continued at %d, want 1004", p.NextN)
	}
}
