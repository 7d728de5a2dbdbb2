package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSandbox_StateDirALiveAgentCanWriteIsRefused (docs/protocol.md §19:
// a state dir is never writable to a sandboxed agent): while a sandboxed
// session's agent runs with cwd W, an open whose stateDir lies beneath W
// — a state dir that agent's domain was not built to protect — is refused
// SANDBOX_CONFLICT naming it, with a complete proof of nothing launched
// and no record written there, as is one that holds W; a stateDir
// elsewhere opens, and once the
// first session's tree is proven gone the same open succeeds. (Found by a
// fresh-user trial: the first agent rewrote the second session's record.)
func TestSandbox_StateDirALiveAgentCanWriteIsRefused(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	a := e.open(s, "writer", "")
	if a.Sandbox == nil || !a.Sandbox.Enforced || !slices.Contains(a.Sandbox.Writable, realDir(t, e.work)) {
		t.Fatalf("sandbox %+v, want the default sandbox with cwd %s writable", a.Sandbox, e.work)
	}
	inside := filepath.Join(e.work, "sd1")
	p := e.openParams("victim", "")
	p["stateDir"] = inside
	d := wantError(t, "open with a stateDir in a live agent's cwd", s.call("session/open", p), -32000, "SANDBOX_CONFLICT")
	if want := filepath.Join(realDir(t, e.work), "sd1"); !slices.Equal(d.Paths, []string{want}) {
		t.Errorf("data.paths = %v, want [%s]", d.Paths, want)
	}
	if d.Cleanup == nil || !d.Cleanup.Complete || d.Cleanup.Verified.Method != "nothing was launched" {
		t.Errorf("data.cleanup = %+v, want a complete proof of nothing launched", d.Cleanup)
	}
	if ents, _ := os.ReadDir(filepath.Join(inside, "sessions")); slices.ContainsFunc(ents, func(e os.DirEntry) bool { return filepath.Ext(e.Name()) == ".json" }) {
		t.Errorf("a record was written in the refused stateDir: %v", ents)
	}

	// So is one not made yet whose parent is a link into that cwd.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(e.work, link); err != nil {
		t.Fatal(err)
	}
	viaLink := e.openParams("via-link", "")
	viaLink["stateDir"] = filepath.Join(link, "new", "sd")
	wantError(t, "open with a new stateDir through a link into a live agent's cwd", s.call("session/open", viaLink), -32000, "SANDBOX_CONFLICT")
	// A stateDir that holds the live agent's cwd is refused too.
	holder := e.openParams("holder", "")
	holder["stateDir"] = filepath.Dir(e.work)
	wantError(t, "open with a stateDir holding a live agent's cwd", s.call("session/open", holder), -32000, "SANDBOX_CONFLICT")

	p2 := e.openParams("elsewhere", "")
	p2["stateDir"] = t.TempDir()
	var other openResult
	s.mustCall("session/open", p2, &other)
	closeProof(s, other.Session, nil)

	closeClean(t, s, a.Session, e.mark, e.work)
	var b openResult
	s.mustCall("session/open", p, &b)
	closeClean(t, s, b.Session, e.mark, e.work)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}
