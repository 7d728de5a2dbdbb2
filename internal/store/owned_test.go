package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOwned_WriteListRemove: the ledger round-trips, files are 0600, bad
// entries are skipped and reported (docs/operations.md, "The ownership
// ledger").
func TestOwned_WriteListRemove(t *testing.T) {
	s := openTemp(t)
	st, err := ProcStartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	o := Owned{ID: "s-2", SidecarPid: os.Getpid(), Session: "s-2", SessionKey: " a ", Pid: os.Getpid(),
		StartTime: st, Pgid: os.Getpid(), Cgroup: "/sys/fs/cgroup/unified/acpx/s-2", Containment: "cgroup",
		CreatedAt: FormatTime(time.Now())}
	o1 := o
	o1.ID, o1.Cgroup = "s-1", ""
	for _, e := range []Owned{o, o1} {
		if err := s.WriteOwned(e); err != nil {
			t.Fatal(err)
		}
		assertMode(t, filepath.Join(s.OwnedDir(), e.ID+".json"), 0o600)
	}
	os.WriteFile(filepath.Join(s.OwnedDir(), "junk.json"), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(s.OwnedDir(), "renamed.json"), []byte(`{"id":"other","pid":1}`), 0o600)
	os.WriteFile(filepath.Join(s.OwnedDir(), ".tmp-123"), []byte("{"), 0o600)
	got, err := s.ListOwned()
	if len(got) != 2 || got[0] != o1 || got[1] != o {
		t.Fatalf("ListOwned = %+v", got)
	}
	if err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "junk.json") || !strings.Contains(err.Error(), "renamed.json") {
		t.Fatalf("ListOwned error = %v, want both bad entries reported", err)
	}
	if ok, err := IdentityMatches(o.Pid, o.StartTime); !ok || err != nil {
		t.Errorf("IdentityMatches(self) = %v, %v", ok, err)
	}
	if ok, _ := IdentityMatches(o.Pid, o.StartTime+1); ok {
		t.Error("IdentityMatches accepted a different start time")
	}
	if err := s.RemoveOwned("s-2"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveOwned("s-2"); err != nil {
		t.Fatalf("RemoveOwned(missing) = %v", err)
	}
	if got, _ := s.ListOwned(); len(got) != 1 || got[0].ID != "s-1" {
		t.Fatalf("after remove: %+v", got)
	}
	for _, bad := range []string{"", ".x", "a/b", "../x", strings.Repeat("a", 129)} {
		if err := s.WriteOwned(Owned{ID: bad, Pid: 1}); err == nil {
			t.Errorf("WriteOwned(id %q) accepted", bad)
		}
	}
	if err := s.WriteOwned(Owned{ID: "z", Pid: -1}); err == nil {
		t.Error("WriteOwned(pid -1) accepted")
	}
	// Pid 0: an entry written before the launch.
	if err := s.WriteOwned(Owned{ID: "pending", Pid: 0, MarkerSHA256: "00"}); err != nil {
		t.Errorf("WriteOwned(pid 0, pending launch): %v", err)
	}
}

// TestProcStat_CommWithSpacesAndParens: field 22 is found after the last ')'.
func TestProcStat_CommWithSpacesAndParens(t *testing.T) {
	line := "4242 (a) b (c) ) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615\n"
	st, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.Pid != 4242 || st.Comm != "a) b (c) " || st.State != 'S' || st.Ppid != 1 || st.Pgrp != 4242 || st.StartTime != 987654 {
		t.Errorf("parse = %+v", st)
	}
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S 1 2 3", "x (y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) accepted", bad)
		}
	}
}

// TestProcStartTime_RealProcessWithHostileName starts a copy of sleep named
// "x) (y z" and reads its identity from /proc; after it is reaped the pid
// no longer matches.
func TestProcStartTime_RealProcessWithHostileName(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "x) (y z")
	if err := os.WriteFile(bin, b, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "30")
	cmd.Env = markedEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	self, err := ProcStartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// cmd.Start returns only after the child's execve succeeded, so comm
	// already holds the new name.
	st, err := ReadProcStat(pid)
	if err != nil || st.Comm != "x) (y z" {
		t.Fatalf("ReadProcStat(child) = %+v, %v", st, err)
	}
	if st.StartTime < self || st.Ppid != os.Getpid() {
		t.Errorf("child stat %+v, self start %d", st, self)
	}
	if live := markedProcs(testMark); len(live) != 1 || live[0] != pid {
		t.Errorf("marker scan sees %v, want [%d]", live, pid)
	}
	if ok, err := IdentityMatches(pid, st.StartTime); !ok || err != nil {
		t.Errorf("IdentityMatches(child) = %v, %v", ok, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := ProcStartTime(pid); !errors.Is(err, fs.ErrNotExist) {
		// The pid may in principle be reused already; then it must differ.
		if ok, _ := IdentityMatches(pid, st.StartTime); ok {
			t.Errorf("reaped child still matches: %v", err)
		}
	}
}

// TestRemoveStaleTemps: temp files of writers killed before their rename
// are removed once old; fresh ones (a live writer's) are kept, and so are
// a key's files whose names merely start with ".tmp-".
func TestRemoveStaleTemps(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(s.OwnedDir(), ".tmp-0123456789abcdef")
	fresh := filepath.Join(s.SessionsDir(), ".tmp-fedcba9876543210")
	// A key's files whose names start like a temp file's (key ".tmp-k").
	keyFiles := []string{filepath.Join(s.SessionsDir(), ".tmp-k.json"), filepath.Join(s.SessionsDir(), ".tmp-k.keylock"),
		filepath.Join(s.SessionsDir(), ".tmp-0123456789abcdef0.journal.ndjson")}
	for _, p := range append([]string{old, fresh}, keyFiles...) {
		if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Minute)
	for _, p := range append([]string{old}, keyFiles...) {
		if err := os.Chtimes(p, past, past); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.RemoveStaleTemps(time.Minute); n != 1 {
		t.Fatalf("removed %d, want 1", n)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("old temp file kept")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temp file removed: %v", err)
	}
	for _, p := range keyFiles {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("a key's file was swept as a temp file: %v", err)
		}
	}
}

// TestRemoveStaleTemps_DeadRestores: a restore's scratch directory
// (decrypted provider state) whose process is gone is removed, a link in
// it removed and not followed; one of a live process is kept, however
// old (adversarial trial: a killed sidecar's 1.4 GB stayed for good).
func TestRemoveStaleTemps_DeadRestores(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(dir, ".acpx-restore-"+strconv.Itoa(gone.Process.Pid)+"-123")
	live := filepath.Join(dir, ".acpx-restore-"+strconv.Itoa(os.Getpid())+"-456")
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(filepath.Join(d, "tree", "home"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "tree", "home", "state.json"), []byte("decrypted"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(d, "tree", "out")); err != nil {
			t.Fatal(err)
		}
		past := time.Now().Add(-2 * time.Minute)
		if err := os.Chtimes(d, past, past); err != nil {
			t.Fatal(err)
		}
	}
	s.RemoveStaleTemps(time.Minute)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead restore's scratch is kept (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(live, "tree", "home", "state.json")); err != nil {
		t.Errorf("a live restore's scratch was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Errorf("a link's target was removed: %v", err)
	}
}
