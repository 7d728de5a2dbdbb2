package launch

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestSetupSandbox_StoreAndKeysAreKeptFromTheAgent: an open whose cwd
// holds the file:// store's root and a master key gets the store
// read-only (sandbox.readOnly) and the key masked; on a machine that
// cannot make a mount namespace the same open is SANDBOX_CONFLICT
// naming the store (and, with no store there, the key), and one whose
// cwd is the store's root is refused everywhere.
func TestSetupSandbox_StoreAndKeysAreKeptFromTheAgent(t *testing.T) {
	work, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store, key := filepath.Join(work, "store"), filepath.Join(work, "keys", "state.key")
	for _, d := range []string{store, filepath.Dir(key)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(key, make([]byte, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &admission.SandboxConfig{Default: sandbox.Workspace, StoreDir: store, Secrets: []string{key},
		Caps: sandbox.Caps{LandlockABI: 7, Namespaces: true, PIDNamespace: true, Seccomp: true}}
	var rules []sandbox.Rule
	site := SandboxSite{ID: "s1", Key: "k", Config: cfg, Launcher: failingLauncher{}, Live: &registry.Sandboxes{},
		StateDirs: func(string) []string { return nil }, SpareTmp: func(string) string { return "" },
		RefuseAllow: func() *protocol.Error { return nil }, Rules: &rules}
	p := protocol.OpenParams{SessionKey: "k", Cwd: work, Command: &protocol.Command{Path: "/bin/true"}}
	sb, _, e := SetupSandbox(site, p, nil)
	if e != nil {
		t.Fatal(e)
	}
	if sb.TmpDir != "" {
		defer os.RemoveAll(sb.TmpDir)
	}
	if !slices.Equal(sb.Result.ReadOnly, []string{store}) || sb.Plan == nil || !slices.Equal(sb.Plan.Mask, []string{key}) ||
		!slices.Equal(sb.Plan.Pin, []string{filepath.Dir(key)}) {
		t.Fatalf("read-only %v, plan %+v; want the store read-only, the key masked and its directory pinned", sb.Result.ReadOnly, sb.Plan)
	}

	cfg.Caps.Namespaces = false
	rules = nil
	_, _, e = SetupSandbox(site, p, nil)
	if e == nil || e.Data.Code != protocol.ErrSandboxConflict || !slices.Equal(e.Data.Paths, []string{store}) {
		t.Fatalf("without a mount namespace: %+v, want SANDBOX_CONFLICT naming the store", e)
	}
	cfg.StoreDir = ""
	_, _, e = SetupSandbox(site, p, nil)
	if e == nil || e.Data.Code != protocol.ErrSandboxConflict || !slices.Equal(e.Data.Paths, []string{key}) {
		t.Fatalf("without a mount namespace: %+v, want SANDBOX_CONFLICT naming the key", e)
	}
	cfg.Caps.Namespaces, cfg.StoreDir = true, store
	p.Cwd = store
	_, _, e = SetupSandbox(site, p, nil)
	if e == nil || e.Data.Code != protocol.ErrSandboxConflict || !slices.Equal(e.Data.Paths, []string{store}) {
		t.Fatalf("cwd = the store's root: %+v, want SANDBOX_CONFLICT naming it", e)
	}
}
