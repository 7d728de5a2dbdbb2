package admission

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestSandboxConfigPolicy_LayersAgainstRootDefaultWithAFilesystemSandbox: processes
// "own-tree" and capabilities "none" are the defaults whenever a
// filesystem sandbox is on, "all" and "keep" otherwise; an open names
// either; a defaulted own-tree this machine cannot give becomes "all"
// with the reason, one the open names stays (Caps.Check then refuses it:
// PLATFORM_UNSUPPORTED).
func TestSandboxConfigPolicy_LayersAgainstRootDefaultWithAFilesystemSandbox(t *testing.T) {
	c := SandboxConfig{Default: sandbox.Workspace, Caps: sandbox.Caps{LandlockABI: 7, Namespaces: true, PIDNamespace: true}}
	pol, why := c.Policy(protocol.OpenParams{})
	if pol.Processes != sandbox.OwnTreeProcesses || pol.Capabilities != sandbox.CapsNone || pol.Signals != sandbox.OwnTree || why != "" {
		t.Errorf("default: %+v %q", pol, why)
	}
	pol, _ = c.Policy(protocol.OpenParams{Sandbox: &protocol.Sandbox{Filesystem: sandbox.Off}})
	if pol.Processes != sandbox.AllProcesses || pol.Capabilities != sandbox.CapsKeep {
		t.Errorf("filesystem off: %+v", pol)
	}
	pol, _ = c.Policy(protocol.OpenParams{Sandbox: &protocol.Sandbox{Filesystem: sandbox.Off, Processes: "own-tree", Capabilities: "none"}})
	if pol.Processes != sandbox.OwnTreeProcesses || pol.Capabilities != sandbox.CapsNone {
		t.Errorf("filesystem off with both named: %+v", pol)
	}
	c.Caps = sandbox.Caps{LandlockABI: 7, Namespaces: true, ProcessesReason: "no pidns here"}
	pol, why = c.Policy(protocol.OpenParams{})
	if pol.Processes != sandbox.AllProcesses || !strings.Contains(why, "no pidns here") {
		t.Errorf("default on a machine without a PID namespace: %+v %q", pol, why)
	}
	pol, why = c.Policy(protocol.OpenParams{Sandbox: &protocol.Sandbox{Processes: "own-tree"}})
	if pol.Processes != sandbox.OwnTreeProcesses || why != "" {
		t.Errorf("own-tree named on such a machine: %+v %q, want it kept (and refused by Caps.Check)", pol, why)
	}
}

// TestSandboxPaths_StoreDirIsProtectedAndKeysAreSecret: the file://
// store's root is never writable, resolved like a state dir; the master
// key files are secrets, resolved, with every link on the way to them
// (a chain included) named where it lies. So a cwd holding the store
// keeps it read-only, a cwd inside it is a conflict, and the key is
// masked, in workspace and strict.
func TestSandboxPaths_StoreDirIsProtectedAndKeysAreSecret(t *testing.T) {
	root := realTemp(t)
	store, keys, work := filepath.Join(root, "ws", "store"), filepath.Join(root, "keys"), filepath.Join(root, "ws")
	for _, d := range []string{store, keys} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(keys, "state.key")
	if err := os.WriteFile(key, make([]byte, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	// old.key -> link2 -> state.key, and the store named through a link.
	if err := os.Symlink("state.key", filepath.Join(keys, "link2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(keys, "link2"), filepath.Join(root, "old.key")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(store, filepath.Join(root, "store-link")); err != nil {
		t.Fatal(err)
	}
	c := SandboxConfig{Default: sandbox.Workspace, StoreDir: filepath.Join(root, "store-link"),
		Secrets: []string{key, filepath.Join(root, "old.key")}}
	p := protocol.OpenParams{Cwd: work, Command: &protocol.Command{Path: "/bin/true"}}
	pol, _ := c.Policy(p)
	paths := c.SandboxPaths(p, pol, nil, []string{filepath.Join(root, "state")})
	if !slices.Contains(paths.Protected, store) || !slices.Contains(paths.Protected, filepath.Join(root, "state")) {
		t.Errorf("protected %v, want the store's root %s and the state dir", paths.Protected, store)
	}
	if !slices.Equal(paths.Secrets, []string{key, key}) {
		t.Errorf("secrets %v, want the key resolved (twice)", paths.Secrets)
	}
	if want := []string{filepath.Join(root, "old.key"), filepath.Join(keys, "link2")}; !slices.Equal(paths.SecretLinks, want) {
		t.Errorf("links %v, want %v", paths.SecretLinks, want)
	}
	for _, fs := range []string{sandbox.Workspace, sandbox.Strict} {
		pol.Filesystem = fs
		plan, ap, err := sandbox.Build(pol, paths, sandbox.BuildOptions{BindReadOnly: true})
		if err != nil {
			t.Fatalf("%s: %v", fs, err)
		}
		if !slices.Equal(ap.ReadOnly, []string{store}) || !slices.Equal(plan.Mask, []string{key}) {
			t.Errorf("%s: read-only %v, mask %v; want the store read-only and the key masked", fs, ap.ReadOnly, plan.Mask)
		}
	}
	inside := protocol.OpenParams{Cwd: store, Command: p.Command}
	pol, _ = c.Policy(inside)
	_, _, err := sandbox.Build(pol, c.SandboxPaths(inside, pol, nil, nil), sandbox.BuildOptions{BindReadOnly: true})
	var ce *sandbox.ConflictError
	if !errors.As(err, &ce) || !slices.Equal(ce.Paths, []string{store}) {
		t.Errorf("cwd = the store's root: %v, want a conflict naming it", err)
	}
}

// realTemp is a temp dir with its links resolved.
func realTemp(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSandboxPaths_KeyNamedThroughALinkAndDotDot (from a review): a key
// flag "<link>/../k" names the file the kernel opens — the link's
// target's parent's k — and the link is on its way; cleaning the text
// first would have named a file that does not exist and left the key
// neither masked nor refused.
func TestSandboxPaths_KeyNamedThroughALinkAndDotDot(t *testing.T) {
	root := realTemp(t)
	if err := os.MkdirAll(filepath.Join(root, "data", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(root, "data", "k")
	if err := os.WriteFile(key, make([]byte, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "srv"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "srv", "l")
	if err := os.Symlink(filepath.Join(root, "data", "x"), link); err != nil {
		t.Fatal(err)
	}
	c := SandboxConfig{Default: sandbox.Workspace, Secrets: []string{link + "/../k"}}
	p := protocol.OpenParams{Cwd: filepath.Join(root, "srv"), Command: &protocol.Command{Path: "/bin/true"}}
	pol, _ := c.Policy(p)
	paths := c.SandboxPaths(p, pol, nil, nil)
	if !slices.Equal(paths.Secrets, []string{key}) {
		t.Errorf("secrets %v, want %v", paths.Secrets, []string{key})
	}
	if !slices.Equal(paths.SecretLinks, []string{link}) {
		t.Errorf("links %v, want %v", paths.SecretLinks, []string{link})
	}
}
