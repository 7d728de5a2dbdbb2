package store

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// TestPending_InPlaceBeforeSyncAndReleased: a deferred save and a deferred
// ledger entry are readable under their names when the call returns
// (before Sync: what admission relies on before the launch and before the
// open's answer), Sync and Release each release the two descriptors the
// Pending held, and a second Sync or Release does nothing.
func TestPending_InPlaceBeforeSyncAndReleased(t *testing.T) {
	s := openTemp(t)
	fds := openFDs(t)
	r := newRecord("k")
	r.LastSeq = 7
	p, err := s.SaveDeferred(r)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load("k"); err != nil || got.LastSeq != 7 {
		t.Fatalf("Load before Sync = %+v, %v", got, err)
	}
	if n := openFDs(t); n != fds+2 {
		t.Fatalf("a Pending holds %d descriptors, want 2 (file and directory)", n-fds)
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(); err != nil {
		t.Fatalf("second Sync = %v", err)
	}
	p.Release()
	if n := openFDs(t); n != fds {
		t.Fatalf("%d descriptors left after Sync", n-fds)
	}

	o := Owned{ID: "s-1", SidecarPid: os.Getpid(), Session: "s-1", SessionKey: "k", CreatedAt: FormatTime(time.Now())}
	q, err := s.WriteOwnedDeferred(o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ListOwned()
	if err != nil || len(got) != 1 || got[0] != o {
		t.Fatalf("ListOwned before Sync = %+v, %v", got, err)
	}
	q.Release()
	q.Release()
	if err := q.Sync(); err != nil {
		t.Fatalf("Sync after Release = %v", err)
	}
	if n := openFDs(t); n != fds {
		t.Fatalf("%d descriptors left after Release", n-fds)
	}
	var none *Pending // a write already durable
	if err := none.Sync(); err != nil {
		t.Fatal(err)
	}
	none.Release()
}

// TestPending_FailedDeferredWriteLeavesNothing: a deferred write that fails
// before its rename returns no Pending, keeps the old file, and leaves no
// temp file and no descriptor.
func TestPending_FailedDeferredWriteLeavesNothing(t *testing.T) {
	s := openTemp(t)
	if err := s.Save(newRecord("k")); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(s.RecordPath("k"))
	fds := openFDs(t)
	crash := errors.New("crash before rename")
	testHookBeforeRename = func(string) error { return crash }
	defer func() { testHookBeforeRename = nil }()
	r := newRecord("k")
	r.LastSeq = 9
	p, err := s.SaveDeferred(r)
	if !errors.Is(err, crash) || p != nil {
		t.Fatalf("SaveDeferred = %v, %v; want the injected crash and no Pending", p, err)
	}
	testHookBeforeRename = nil
	if after, _ := os.ReadFile(s.RecordPath("k")); string(after) != string(before) {
		t.Fatal("record changed by a failed deferred save")
	}
	if n := openFDs(t); n != fds {
		t.Fatalf("%d descriptors left by a failed write", n-fds)
	}
	ents, _ := os.ReadDir(s.SessionsDir())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("stray temp file %s", e.Name())
		}
	}
}
