package journal

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
)

// TestJournal_PlantedSegmentLinkIsRefused: a live segment planted as a
// symlink to a file outside the state dir is refused at Open (never
// created or appended to), and a rotated one is refused by a reader
// (docs/protocol.md §20).
func TestJournal_PlantedSegmentLinkIsRefused(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "victim")
	if err := os.Symlink(target, SegmentPath(dir, Stem("future"), 0)); err != nil {
		t.Fatal(err)
	}
	if j, err := Open(dir, "future", 0); !errors.Is(err, store.ErrUnsafeFile) {
		if j != nil {
			j.AppendNotice("x", []byte(`{}`))
			_ = j.Close()
		}
		t.Fatalf("Open through a planted link: %v, want store.ErrUnsafeFile", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the link's target was created: %v", err)
	}
	if err := os.WriteFile(target, []byte(`{"seq":1,"method":"session/update","params":{},"at":"x"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, SegmentPath(dir, Stem("old"), 1)); err != nil {
		t.Fatal(err)
	}
	if p, err := ReadDir(dir, "old", 0, 0); !errors.Is(err, store.ErrUnsafeFile) || len(p.Events) != 0 {
		t.Fatalf("read through a planted segment link: %d events, %v", len(p.Events), err)
	}
}

// TestJournal_HoleWithoutNewlineCostsNoMemory: a segment grown by a 512 MiB
// hole with no newline (after real entries, and before one more) is read
// with the hole skipped unread: the entries on both sides are returned and
// the read allocates far less than the hole (measured in bytes allocated).
func TestJournal_HoleWithoutNewlineCostsNoMemory(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, "holey", 0)
	if err != nil {
		t.Fatal(err)
	}
	j.AppendUpdate(1, updateParams(1))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	path := SegmentPath(dir, Stem("holey"), 0)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	const hole = 512 << 20
	if err := f.Truncate(st.Size() + hole); err != nil { // NUL bytes, no newline
		t.Fatal(err)
	}
	line := []byte("\n" + `{"n":2,"seq":2,"method":"session/update","params":` + string(updateParams(2)) + `,"at":"2026-01-01T00:00:00.000000000Z"}` + "\n")
	if _, err := f.WriteAt(line, st.Size()+hole); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p, err := ReadDirLimited(dir, "holey", 0, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	j2, err := Open(dir, "holey", 0) // finds the last seq past the hole
	if err != nil {
		t.Fatal(err)
	}
	last := j2.LastSeq()
	_ = j2.Close()
	runtime.ReadMemStats(&after)
	if es := decode(t, p); len(es) != 2 || es[0].Seq != 1 || es[1].Seq != 2 || last != 2 {
		t.Fatalf("entries around the hole: %+v, last seq %d", es, last)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("reading past a %d-byte hole allocated %d bytes", hole, got)
	}
}
