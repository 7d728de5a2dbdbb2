package registry

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tmpPrefix is the name prefix of session id's private TMPDIR
// (internal/launch's TmpPrefix, sandbox.go).
func tmpPrefix(id string) string { return "acpx-" + id + "-tmp-" }

// privateTmpParent is the parent of private TMPDIRs: os.TempDir() with
// its links resolved (internal/launch's PrivateTmpParent, sandbox.go).
func privateTmpParent() string {
	if r, err := filepath.EvalSymlinks(os.TempDir()); err == nil {
		return r
	}
	return os.TempDir()
}

// spareDirs lists the spare TMPDIRs in dir.
func spareDirs(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, spareTmpPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fillTmpSpares runs p.fill and requires n spares in the pool.
func fillTmpSpares(t *testing.T, p *TmpSpares, n int) {
	t.Helper()
	p.fill()
	p.mu.Lock()
	got := len(p.dirs)
	p.mu.Unlock()
	if got != n {
		t.Fatalf("%d spare TMPDIRs after fill, want %d", got, n)
	}
}

func dirInode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestTmpSpares_TakeRenamesASpareAndCloseRemovesTheRest: a take from an
// empty pool finds none and makes none; after fill the next is a spare
// renamed to the session's prefix (same directory: same inode), 0700 and
// empty, and does not refill; a spare something wrote into is not handed
// out; close leaves no spare behind and fill then makes none.
func TestTmpSpares_TakeRenamesASpareAndCloseRemovesTheRest(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	p := NewTmpSpares(2, privateTmpParent)
	if got := p.Take(tmpPrefix("s1")); got != "" {
		t.Fatalf("take from an empty pool = %q, want none", got)
	}
	if n := len(spareDirs(t, tmp)); n != 0 {
		t.Fatalf("a take made %d spares, want none", n)
	}
	fillTmpSpares(t, p, 2)
	spares := spareDirs(t, tmp)
	if len(spares) != 2 {
		t.Fatalf("spares on disk %v, want 2", spares)
	}
	p.mu.Lock()
	oldest := dirInode(t, p.dirs[0].path)
	p.mu.Unlock()
	got := p.Take(tmpPrefix("s2"))
	if filepath.Dir(got) != tmp || !strings.HasPrefix(filepath.Base(got), tmpPrefix("s2")) {
		t.Fatalf("take = %q, want %s/%s…", got, tmp, tmpPrefix("s2"))
	}
	if fi, err := os.Lstat(got); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("taken TMPDIR %s: %v %v, want a 0700 directory", got, fi, err)
	}
	if dirInode(t, got) != oldest {
		t.Fatal("the TMPDIR taken is not the oldest spare renamed")
	}
	p.mu.Lock()
	n := len(p.dirs)
	p.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d spares after a take, want 1: a take does not refill", n)
	}
	fillTmpSpares(t, p, 2)
	p.mu.Lock()
	planted := p.dirs[0].path
	p.mu.Unlock()
	if err := os.WriteFile(filepath.Join(planted, "planted"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	next := p.Take(tmpPrefix("s3"))
	if next == "" || dirInode(t, next) == dirInode(t, planted) {
		t.Fatalf("take = %q: the spare with a file in it was handed out", next)
	}
	if _, err := os.Stat(filepath.Join(next, "planted")); err == nil {
		t.Fatal("the TMPDIR taken holds the planted file")
	}
	fillTmpSpares(t, p, 2)
	p.Close()
	left := spareDirs(t, tmp)
	if len(left) != 1 || left[0] != planted {
		t.Fatalf("spares left after close %v, want only the non-empty one (never emptied by the pool)", left)
	}
	if got := p.Take(tmpPrefix("s4")); got != "" {
		t.Fatalf("take after close = %q, want none", got)
	}
	p.fill()
	if len(spareDirs(t, tmp)) != 1 {
		t.Fatal("fill after close made spares")
	}
}

// TestTmpSpares_StaleSweepTakesOnlyOldEmptyOnes: RemoveStaleTmpSpares
// removes a spare older than twice spareTmpMaxAge and leaves a younger
// one (a live sidecar's) and an old one that is not empty.
func TestTmpSpares_StaleSweepTakesOnlyOldEmptyOnes(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mk := func(name string, age time.Duration, file bool) string {
		d := filepath.Join(tmp, spareTmpPrefix+name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if file {
			if err := os.WriteFile(filepath.Join(d, "f"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(d, at, at); err != nil {
			t.Fatal(err)
		}
		return d
	}
	old := mk("old", 3*spareTmpMaxAge, false)
	young := mk("young", spareTmpMaxAge, false)
	full := mk("full", 3*spareTmpMaxAge, true)
	if n := RemoveStaleTmpSpares(); n != 1 {
		t.Fatalf("removed %d, want 1", n)
	}
	if _, err := os.Lstat(old); err == nil {
		t.Fatal("the old spare is still there")
	}
	for _, d := range []string{young, full} {
		if _, err := os.Lstat(d); err != nil {
			t.Fatalf("%s removed: %v", d, err)
		}
	}
}
