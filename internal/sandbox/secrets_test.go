package sandbox

import (
	"errors"
	"slices"
	"testing"
)

// TestBuild_SecretsAreMaskedInEveryFilesystemMode: a key file is masked
// whether the tree would read it (workspace reads "/"; strict reads /etc)
// or not, and wherever it lies; one in the cwd gets the directories
// between it and the cwd pinned, so it cannot be renamed away; a missing
// one is left out; filesystem off has no filesystem rules and masks
// nothing.
func TestBuild_SecretsAreMaskedInEveryFilesystemMode(t *testing.T) {
	dirs := append(slices.Clone(sysDirs), "/w", "/h", "/keys")
	files := append(slices.Clone(devFiles), "/keys/state.key", "/etc/acpx/old.key", "/w/a/b/state.key")
	paths := Paths{Cwd: "/w", Home: "/h", Secrets: []string{"/keys/state.key", "/etc/acpx/old.key", "/w/a/b/state.key", "/gone.key"}}
	want := []string{"/etc/acpx/old.key", "/keys/state.key", "/w/a/b/state.key"}
	for _, fs := range []string{Workspace, Strict} {
		pol := wsPolicy()
		pol.Filesystem = fs
		plan, ap, err := Build(pol, paths, BuildOptions{BindReadOnly: true, Exists: fakeFS(dirs, files)})
		if err != nil {
			t.Fatalf("%s: %v", fs, err)
		}
		if !slices.Equal(plan.Mask, want) || !slices.Equal(ap.Masked, want) {
			t.Errorf("%s: mask %v / %v, want %v", fs, plan.Mask, ap.Masked, want)
		}
		if pins := []string{"/w/a", "/w/a/b"}; !slices.Equal(plan.Pin, pins) {
			t.Errorf("%s: pins %v, want %v", fs, plan.Pin, pins)
		}
		if !plan.NewMountNS() || plan.Empty() {
			t.Errorf("%s: a plan with masks needs a mount namespace", fs)
		}
	}
	pol := wsPolicy()
	pol.Filesystem = Off
	if plan, _, err := Build(pol, paths, BuildOptions{BindReadOnly: true, Exists: fakeFS(dirs, files)}); err != nil || len(plan.Mask) != 0 {
		t.Errorf("filesystem off: %v, mask %v", err, plan.Mask)
	}
}

// TestBuild_SecretsWithAProtectedPathKeepBothPinned: a key inside a
// protected path that a writable one holds is masked, and the pins cover
// the way to both.
func TestBuild_SecretsWithAProtectedPathKeepBothPinned(t *testing.T) {
	paths := Paths{Cwd: "/w", Protected: []string{"/w/x/state"}, Secrets: []string{"/w/y/z/k"}}
	plan, _, err := Build(wsPolicy(), paths, BuildOptions{BindReadOnly: true, Exists: fakeFS([]string{"/", "/w"}, []string{"/w/y/z/k"})})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/w/x", "/w/y", "/w/y/z"}; !slices.Equal(plan.Pin, want) {
		t.Errorf("pins %v, want %v", plan.Pin, want)
	}
	if !slices.Equal(plan.ReadOnly, []string{"/w/x/state"}) || !slices.Equal(plan.Mask, []string{"/w/y/z/k"}) {
		t.Errorf("read-only %v, mask %v", plan.ReadOnly, plan.Mask)
	}
}

// TestBuild_SecretsThatCannotBeHiddenAreAConflict: without a private
// mount namespace a key the tree could read is a conflict naming it
// (workspace always; strict when a readable or writable path holds
// it), one it cannot reach is no conflict; a writable path that is or
// lies inside a secret, and a link to a key where the tree writes, are
// conflicts whatever the sidecar can do.
func TestBuild_SecretsThatCannotBeHiddenAreAConflict(t *testing.T) {
	dirs := append(slices.Clone(sysDirs), "/w", "/keys")
	files := []string{"/keys/state.key", "/etc/acpx/old.key"}
	paths := Paths{Cwd: "/w", Secrets: []string{"/keys/state.key"}}
	var ce *ConflictError
	_, _, err := Build(wsPolicy(), paths, BuildOptions{Exists: fakeFS(dirs, files)})
	if !errors.As(err, &ce) || !slices.Equal(ce.Paths, []string{"/keys/state.key"}) {
		t.Errorf("workspace without bind mounts: %v, want a conflict on the key", err)
	}
	strict := wsPolicy()
	strict.Filesystem = Strict
	if plan, _, err := Build(strict, paths, BuildOptions{Exists: fakeFS(dirs, files)}); err != nil || len(plan.Mask) != 0 {
		t.Errorf("strict, key out of reach, without bind mounts: %v, mask %v; want neither", err, plan.Mask)
	}
	paths.Secrets = []string{"/etc/acpx/old.key"}
	if _, _, err := Build(strict, paths, BuildOptions{Exists: fakeFS(dirs, files)}); !errors.As(err, &ce) || !slices.Equal(ce.Paths, paths.Secrets) {
		t.Errorf("strict, key under /etc, without bind mounts: %v, want a conflict", err)
	}
	for _, tc := range []struct {
		name  string
		paths Paths
		want  string
	}{
		{"writable inside a secret directory", Paths{Cwd: "/keys/sub", Secrets: []string{"/keys"}}, "/keys"},
		{"a link to the key in the cwd", Paths{Cwd: "/w", Secrets: []string{"/keys/state.key"}, SecretLinks: []string{"/w/key"}}, "/w/key"},
	} {
		_, _, err := Build(wsPolicy(), tc.paths, BuildOptions{BindReadOnly: true, Exists: fakeFS(append(dirs, "/keys/sub"), files)})
		if !errors.As(err, &ce) || !slices.Equal(ce.Paths, []string{tc.want}) {
			t.Errorf("%s: %v, want a conflict on %s", tc.name, err, tc.want)
		}
	}
	if _, _, err := Build(wsPolicy(), Paths{Cwd: "/w", Secrets: []string{"/keys/state.key"}, SecretLinks: []string{"/etc/key"}},
		BuildOptions{BindReadOnly: true, Exists: fakeFS(dirs, files)}); err != nil {
		t.Errorf("a link to the key outside every writable path: %v", err)
	}
}

// TestCapsCheck_MasksNeedAMountNamespace: a plan with masks is
// unenforceable without CAP_SYS_ADMIN.
func TestCapsCheck_MasksNeedAMountNamespace(t *testing.T) {
	plan := Plan{Mask: []string{"/k"}}
	if err := (Caps{LandlockABI: 7}).Check(&plan); err == nil {
		t.Errorf("masks allowed without namespaces")
	}
	if err := (Caps{LandlockABI: 7, Namespaces: true}).Check(&plan); err != nil {
		t.Errorf("masks with namespaces: %v", err)
	}
}

// TestBuild_HostShmIsAWritableRoot: with processes "all" the tree writes
// the host's /dev/shm, so a state dir there is kept read-only and a key
// there masked with its way pinned, as in any writable path; with
// processes "own-tree" the tree's /dev/shm is a fresh tmpfs of its own,
// which holds neither, and nothing under it is bound or masked (the name
// does not exist in the tree).
func TestBuild_HostShmIsAWritableRoot(t *testing.T) {
	paths := Paths{Cwd: "/w", Protected: []string{"/dev/shm/acpx/state"}, Secrets: []string{"/dev/shm/keys/state.key"}}
	exists := fakeFS([]string{"/", "/w", DevShm}, []string{"/dev/shm/keys/state.key"})
	pol := wsPolicy()
	pol.Processes = AllProcesses
	plan, _, err := Build(pol, paths, BuildOptions{BindReadOnly: true, Exists: exists})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.ReadOnly, []string{"/dev/shm/acpx/state"}) || !slices.Equal(plan.Mask, []string{"/dev/shm/keys/state.key"}) ||
		!slices.Equal(plan.Pin, []string{"/dev/shm/acpx", "/dev/shm/keys"}) {
		t.Errorf("host /dev/shm: read-only %v, mask %v, pins %v", plan.ReadOnly, plan.Mask, plan.Pin)
	}
	var ce *ConflictError
	if _, _, err := Build(pol, paths, BuildOptions{Exists: exists}); !errors.As(err, &ce) {
		t.Errorf("host /dev/shm without bind mounts: %v, want a conflict", err)
	}
	plan, _, err = Build(wsPolicy(), paths, BuildOptions{BindReadOnly: true, Exists: exists})
	if err != nil || len(plan.ReadOnly) != 0 || len(plan.Mask) != 0 || len(plan.Pin) != 0 {
		t.Errorf("own /dev/shm: %v, read-only %v, mask %v, pins %v; want none", err, plan.ReadOnly, plan.Mask, plan.Pin)
	}
}

// TestBuild_MasksComeWithDevicesOnlyAndRefuseKeptCapabilities (from a
// review): a plan that masks a key also leaves the tree's /dev opening
// only Devices (a disk's raw blocks hold the key's bytes), and a tree
// that keeps its capabilities — which reach a hidden file past its mask —
// is refused, naming the key; without a key neither applies.
func TestBuild_MasksComeWithDevicesOnlyAndRefuseKeptCapabilities(t *testing.T) {
	exists := fakeFS([]string{"/", "/w", "/keys"}, []string{"/keys/state.key"})
	paths := Paths{Cwd: "/w", Secrets: []string{"/keys/state.key"}}
	plan, _, err := Build(wsPolicy(), paths, BuildOptions{BindReadOnly: true, Exists: exists})
	if err != nil || !plan.NoDev {
		t.Errorf("a masked key: %v, noDev %v; want devices only", err, plan.NoDev)
	}
	keep := wsPolicy()
	keep.Capabilities = CapsKeep
	var ce *ConflictError
	if _, _, err := Build(keep, paths, BuildOptions{BindReadOnly: true, Exists: exists}); !errors.As(err, &ce) || !slices.Equal(ce.Paths, paths.Secrets) {
		t.Errorf("capabilities keep with a key: %v, want a conflict naming the key", err)
	}
	if plan, _, err := Build(keep, Paths{Cwd: "/w"}, BuildOptions{BindReadOnly: true, Exists: exists}); err != nil || plan.NoDev {
		t.Errorf("capabilities keep without a key: %v, noDev %v; want neither", err, plan.NoDev)
	}
}
