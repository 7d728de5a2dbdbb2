package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ledgerEntries are the ownership ledger's entries in stateDir (what a
// sidecar reads: <id>.json in owned/; a spare temp file is not one).
func ledgerEntries(t testing.TB, stateDir string) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(stateDir, "owned"))
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			out = append(out, e.Name())
		}
	}
	return out
}

// namesWithPrefix lists the entries of dir whose name starts with prefix.
func namesWithPrefix(dir, prefix string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestSpares_ReadyWhileRunningGoneAfterExit (docs/architecture.md,
// "Spare files"): while a sidecar whose own environment has a TMPDIR runs
// a sandboxed session, that session gets a private TMPDIR beneath it (the
// inherited one is not writable to it; an open's own env.TMPDIR is used as
// given: docs/protocol.md §19), its state directory holds spare temp files
// in sessions/ and owned/ and its TMPDIR two spare private TMPDIRs; after
// the sessions' proofs and a clean exit none is left — the state directory
// holds the records, the hold files and the journals, the TMPDIR nothing.
func TestSpares_ReadyWhileRunningGoneAfterExit(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	tmp := t.TempDir()
	s := startSidecarVia(t, []string{"env", "TMPDIR=" + tmp}, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.open(s, "spares", "")
	// The sidecar's own TMPDIR, passed by --inherit-env minimal, is not
	// the agent's: a private one is made beneath it, and it is not writable.
	if o.Sandbox == nil || !o.Sandbox.Enforced || !strings.HasPrefix(o.Sandbox.TmpDir, tmp+"/") || slices.Contains(o.Sandbox.Writable, tmp) {
		t.Fatalf("sandbox %+v, want the default sandbox with a private TMPDIR in %s, and %[2]s not writable", o.Sandbox, tmp)
	}
	sessions, owned := filepath.Join(e.stateDir, "sessions"), filepath.Join(e.stateDir, "owned")
	s.waitFor(5*time.Second, "spares made", func() bool {
		return len(namesWithPrefix(sessions, ".tmp-")) > 0 && len(namesWithPrefix(owned, ".tmp-")) > 0 &&
			len(namesWithPrefix(tmp, "acpx-spare-tmp-")) == 2
	})
	closeClean(t, s, o.Session, e.mark, e.work)
	// A TMPDIR the open names is used as given.
	own := realDir(t, t.TempDir())
	p := e.openParams("own-tmp", "")
	p["env"].(map[string]string)["TMPDIR"] = own
	var o2 openResult
	s.mustCall("session/open", p, &o2)
	if o2.Sandbox == nil || o2.Sandbox.TmpDir != "" || !slices.Contains(o2.Sandbox.Writable, own) {
		t.Fatalf("sandbox %+v, want the open's TMPDIR %s writable and no private one", o2.Sandbox, own)
	}
	closeClean(t, s, o2.Session, e.mark, e.work)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	for _, d := range []string{sessions, owned} {
		if left := namesWithPrefix(d, ".tmp-"); len(left) != 0 {
			t.Errorf("%s: temp files left after a clean exit: %v", d, left)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the sidecar's TMPDIR holds %v after a clean exit, want nothing", left)
	}
}

// TestSpares_NoSpareTMPDIRsWithoutPrivateOnes: a sidecar whose sessions
// get no private TMPDIR (--default-sandbox off) refills its store's spare
// files after an open, but makes no spare TMPDIR.
func TestSpares_NoSpareTMPDIRsWithoutPrivateOnes(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	tmp := t.TempDir()
	s := startSidecarVia(t, []string{"env", "TMPDIR=" + tmp}, "--state-dir", e.stateDir, "--default-sandbox", "off")
	s.initialize(false)
	o := e.open(s, "no-sandbox", "")
	if o.Sandbox != nil && o.Sandbox.TmpDir != "" {
		t.Fatalf("sandbox %+v, want no private TMPDIR", o.Sandbox)
	}
	sessions := filepath.Join(e.stateDir, "sessions")
	s.waitFor(5*time.Second, "the store's spares refilled", func() bool { return len(namesWithPrefix(sessions, ".tmp-")) == 4 })
	closeClean(t, s, o.Session, e.mark, e.work)
	if left := namesWithPrefix(tmp, "acpx-spare-tmp-"); len(left) != 0 {
		t.Errorf("spare TMPDIRs %v made by a sidecar that makes no private TMPDIR", left)
	}
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}
