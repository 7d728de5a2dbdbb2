package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fullTmpfs mounts a 256 KiB tmpfs (root only; the test is skipped
// otherwise) and returns its path and a function that fills it until
// writes fail with ENOSPC, and one that frees it again. It is unmounted
// at cleanup, after the sidecar's own cleanup (register it first).
func fullTmpfs(t *testing.T) (dir string, fill, free func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir = t.TempDir()
	if err := mountTmpfs(dir, "size=256k,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unmountTmpfs(dir); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	ballast := filepath.Join(dir, "ballast")
	fill = func() {
		t.Helper()
		f, err := os.OpenFile(ballast, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 4096)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling the tmpfs: %v", err)
				}
				return
			}
		}
	}
	free = func() {
		t.Helper()
		if err := os.Remove(ballast); err != nil {
			t.Fatal(err)
		}
	}
	return dir, fill, free
}

// TestStore_FullStateFilesystemLaunchesNothing (docs/protocol.md §18.5):
// with the state directory's filesystem genuinely full (a tmpfs filled to
// ENOSPC), the ownership ledger entry cannot be written, so the open
// fails STORE_UNAVAILABLE with a complete proof whose reason names the
// store, and the provider is never started: the fault agent's record
// file (written first thing at its start) does not exist and no process
// carries the test's marker. Once space is freed the same sidecar opens
// the key normally.
func TestStore_FullStateFilesystemLaunchesNothing(t *testing.T) {
	e := newFaultEnv(t)
	state, fill, free := fullTmpfs(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)

	// First use of the state dir: the store (sessions/, owned/) exists.
	p := e.openParams("warm", "")
	p["stateDir"] = state
	var warm openResult
	s.mustCall("session/open", p, &warm)
	seedCloseProof(t, s, warm.Session, map[string]any{"discardPersistentState": true})

	fill()
	rec := seedRecordFile(t)
	p = withHostHome(e.openParams("full", "record="+rec))
	p["stateDir"] = state
	f := s.call("session/open", p)
	if f.Error != nil {
		t.Logf("refused: %s", f.Error.Message)
	}
	d := wantError(t, "open on a full state filesystem", f, -32000, "STORE_UNAVAILABLE")
	if d.Cleanup == nil || !d.Cleanup.Complete || len(d.Cleanup.Processes) != 0 || d.Cleanup.Verified.Method != "nothing was launched" {
		t.Fatalf("data.cleanup = %+v, want a complete proof of nothing launched", d.Cleanup)
	}
	if r := d.Cleanup.Reason; !strings.Contains(r, "ownership ledger") || !strings.Contains(r, "STORE_UNAVAILABLE") {
		t.Errorf("proof reason %q does not say the store failed", r)
	}
	if _, err := os.Stat(rec); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the provider was started (its record file exists: %v)", err)
	}
	if left := markedPids(e.mark, ""); len(left) != 0 {
		t.Errorf("processes carrying the marker after a refused open: %v", left)
	}
	if ents := ledgerEntries(t, state); len(ents) != 0 {
		t.Errorf("ledger entries left behind: %v", ents)
	}

	free()
	var again openResult
	s.mustCall("session/open", p, &again)
	if _, err := os.Stat(rec); err != nil {
		t.Errorf("after freeing space the provider did not start: %v", err)
	}
	seedCloseProof(t, s, again.Session, nil)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}
