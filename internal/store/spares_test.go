package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tempInodes maps the inode of every ".tmp-*" file in dir to its name.
func tempInodes(t *testing.T, dir string) map[uint64]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]string{}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".tmp-") {
			continue
		}
		if fi, err := e.Info(); err == nil {
			out[fi.Sys().(*syscall.Stat_t).Ino] = e.Name()
		}
	}
	return out
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// fillSpares runs s.FillSpares, requires n spares in each directory, in
// the pool and on disk, and returns their inodes, sessions/ and owned/
// together.
func fillSpares(t *testing.T, s *Store, n int) map[uint64]string {
	t.Helper()
	s.FillSpares()
	p := s.pool()
	p.mu.Lock()
	got := [2]int{len(p.byDir[s.sessions]), len(p.byDir[s.owned])}
	p.mu.Unlock()
	if got != [2]int{n, n} {
		t.Fatalf("spares (sessions/, owned/) after FillSpares = %v, want %d each", got, n)
	}
	all := tempInodes(t, s.sessions)
	for ino, name := range tempInodes(t, s.owned) {
		all[ino] = name
	}
	if len(all) != 2*n {
		t.Fatalf("%d temp files on disk, want %d spares", len(all), 2*n)
	}
	return all
}

// TestSpares_WritesAndLocksUseThemAndCloseRemovesThem: a store that keeps
// spares writes a record, a ledger entry, a key's hold file and a
// record's lock file into inodes made ahead (each file's inode is a
// former spare's); KeepSpares makes none, FillSpares makes them and the
// spares hold no descriptor; a use does not refill; Close leaves no temp
// file and no descriptor behind; the store still writes after Close, and
// FillSpares then makes none.
func TestSpares_WritesAndLocksUseThemAndCloseRemovesThem(t *testing.T) {
	s := openTemp(t)
	fds := openFDs(t)
	s.KeepSpares(4)
	if n := len(tempInodes(t, s.sessions)) + len(tempInodes(t, s.owned)); n != 0 {
		t.Fatalf("KeepSpares made %d spares, want none before FillSpares", n)
	}
	spares := fillSpares(t, s, 4)
	if n := openFDs(t); n != fds {
		t.Fatalf("eight spares hold %d descriptors, want none (kept by name)", n-fds)
	}

	l, err := s.LockKey("k") // the hold file: a spare renamed
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := s.Save(newRecord("k")); err != nil { // the lock file and the temp file
		t.Fatal(err)
	}
	if err := s.WriteOwned(Owned{ID: "s-1", SidecarPid: os.Getpid(), Session: "s-1", SessionKey: "k", CreatedAt: FormatTime(time.Now())}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.KeyLockPath("k"), s.lockPath("k"), s.RecordPath("k"), filepath.Join(s.owned, "s-1.json")} {
		if _, ok := spares[inode(t, p)]; !ok {
			t.Errorf("%s was created, not made from a spare", filepath.Base(p))
		}
	}
	if got, err := s.Load("k"); err != nil || got.SessionKey != "k" {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	p := s.pool()
	p.mu.Lock()
	left := [2]int{len(p.byDir[s.sessions]), len(p.byDir[s.owned])}
	p.mu.Unlock()
	if left != [2]int{1, 3} { // the hold file, the lock file, two temp files
		t.Fatalf("spares left (sessions/, owned/) = %v, want [1 3]: a use does not refill", left)
	}
	fillSpares(t, s, 4)
	l.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left := len(tempInodes(t, s.sessions)) + len(tempInodes(t, s.owned)); left != 0 {
		t.Fatalf("%d temp files left after Close", left)
	}
	if n := openFDs(t); n != fds {
		t.Fatalf("%d descriptors left after Close", n-fds)
	}
	if err := s.Save(newRecord("k2")); err != nil {
		t.Fatalf("Save after Close = %v", err)
	}
	s.FillSpares()
	if left := len(tempInodes(t, s.sessions)) + len(tempInodes(t, s.owned)); left != 0 {
		t.Fatalf("FillSpares after Close made %d spares", left)
	}
}

// TestSpares_GoneOrStaleAreNotUsed: a spare removed from under the pool
// (a sibling's RemoveStaleTemps) is skipped, and one spareMaxAge old or
// not empty is removed rather than used; writes succeed all the same.
func TestSpares_GoneOrStaleAreNotUsed(t *testing.T) {
	s := openTemp(t)
	s.KeepSpares(2)
	defer s.Close()
	fillSpares(t, s, 2)
	for _, name := range tempInodes(t, s.sessions) {
		if err := os.Remove(filepath.Join(s.sessions, name)); err != nil {
			t.Fatal(err)
		}
	}
	// Written into a removed spare, the rename into place would fail.
	if err := s.Save(newRecord("k")); err != nil {
		t.Fatalf("Save with the spares removed = %v", err)
	}
	if got, err := s.Load("k"); err != nil || got.SessionKey != "k" {
		t.Fatalf("Load = %+v, %v", got, err)
	}

	// A spare grown old, or one something wrote into, is removed, not
	// handed out.
	p := s.pool()
	fillSpares(t, s, 2)
	p.mu.Lock()
	p.byDir[s.owned][0].made = time.Now().Add(-spareMaxAge)
	written := filepath.Join(s.owned, p.byDir[s.owned][1].name)
	p.mu.Unlock()
	if err := os.WriteFile(written, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	unfit := tempInodes(t, s.owned)
	d, err := OpenSafeDir(s.owned)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if f, name, ok := p.take(d); ok {
		f.Close()
		t.Fatalf("take handed out %s, want neither of the unfit spares", name)
	}
	for _, name := range unfit {
		if _, err := os.Lstat(filepath.Join(s.owned, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("unfit spare %s: %v, want it removed", name, err)
		}
	}
	if err := s.WriteOwned(Owned{ID: "s-1", SidecarPid: os.Getpid(), Session: "s-1", SessionKey: "k", CreatedAt: FormatTime(time.Now())}); err != nil {
		t.Fatal(err)
	}
}

// TestSpares_RenameNoReplaceKeepsAnExistingFile: the rename that turns a
// spare into a lock file never replaces a file of that name (the
// existing one wins: openOrCreate then opens it).
func TestSpares_RenameNoReplaceKeepsAnExistingFile(t *testing.T) {
	s := openTemp(t)
	d, err := OpenSafeDir(s.sessions)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := os.WriteFile(filepath.Join(s.sessions, "held"), []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, tmp, err := d.CreateTemp()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = d.renameNoReplace(tmp, "held")
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("no RENAME_NOREPLACE on this filesystem")
	}
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("renameNoReplace over a file = %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.sessions, "held")); string(b) != "1\n" {
		t.Fatalf("the existing file was replaced: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(s.sessions, tmp)); err != nil {
		t.Fatalf("the spare is gone: %v", err)
	}
}
