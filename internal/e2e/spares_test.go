package e2e

import (
	"os"
	"path/filepath"
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
// "Spare files"): while a sidecar runs a sandboxed session, its state
// directory holds spare temp files in sessions/ and owned/ and its TMPDIR
// two spare private TMPDIRs; after the session's proof and a clean exit
// none is left — the state directory holds the record, the hold file and
// the journal, the TMPDIR nothing.
func TestSpares_ReadyWhileRunningGoneAfterExit(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	tmp := t.TempDir()
	s := startSidecarVia(t, []string{"env", "TMPDIR=" + tmp}, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("spares", "")
	p["env"].(map[string]string)["TMPDIR"] = "" // the sidecar's own is not the agent's: a private one is made
	var o openResult
	s.mustCall("session/open", p, &o)
	if o.Sandbox == nil || !o.Sandbox.Enforced || !strings.HasPrefix(o.Sandbox.TmpDir, tmp+"/") {
		t.Fatalf("sandbox %+v, want the default sandbox with a private TMPDIR in %s", o.Sandbox, tmp)
	}
	sessions, owned := filepath.Join(e.stateDir, "sessions"), filepath.Join(e.stateDir, "owned")
	s.waitFor(5*time.Second, "spares made", func() bool {
		return len(namesWithPrefix(sessions, ".tmp-")) > 0 && len(namesWithPrefix(owned, ".tmp-")) > 0 &&
			len(namesWithPrefix(tmp, "acpx-spare-tmp-")) == 2
	})
	closeClean(t, s, o.Session, e.mark, e.work)
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
