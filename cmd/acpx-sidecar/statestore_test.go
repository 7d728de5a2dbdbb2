package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestStateFlags_SandboxPaths: the master key files are the sandbox's
// secrets and a file:// store's root its protected store dir (with both
// also StateSecrets); an s3:// store has no root, no store has neither.
func TestStateFlags_SandboxPaths(t *testing.T) {
	f := stateFlags{url: "file:///srv/acpx/store/", keyFile: "/etc/acpx/state.key", oldKeyFile: "/etc/acpx/old.key"}
	if got := f.keyPaths(); !slices.Equal(got, []string{"/etc/acpx/state.key", "/etc/acpx/old.key"}) {
		t.Errorf("keys %v", got)
	}
	if got := f.fileRoot(); got != "/srv/acpx/store" {
		t.Errorf("file root %q", got)
	}
	if got := f.secretPaths(); !slices.Equal(got, []string{"/etc/acpx/state.key", "/etc/acpx/old.key", "/srv/acpx/store"}) {
		t.Errorf("state secrets %v", got)
	}
	f.url = "s3://bucket/prefix"
	if got := f.fileRoot(); got != "" || len(f.keyPaths()) != 2 {
		t.Errorf("s3: root %q, keys %v", got, f.keyPaths())
	}
	f = stateFlags{}
	if f.fileRoot() != "" || f.keyPaths() != nil || f.secretPaths() != nil {
		t.Errorf("no store: %q %v %v", f.fileRoot(), f.keyPaths(), f.secretPaths())
	}
}

// TestStateFlags_KeyPathsAreTheFilesTheKernelOpens (from a review): a
// key flag with a link before ".." reaches the sandbox uncleaned (it
// resolves it as the kernel does) and the state secrets as the file the
// kernel opens (the link resolved first), not the one its text cleans
// to.
func TestStateFlags_KeyPathsAreTheFilesTheKernelOpens(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "data", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(root, "data", "k")
	if err := os.WriteFile(real, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "srv"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "data", "x"), filepath.Join(root, "srv", "l")); err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks(real)
	if err != nil {
		t.Fatal(err)
	}
	flag := filepath.Join(root, "srv", "l") + "/../k"
	f := stateFlags{url: "s3://bucket/p", keyFile: flag}
	if got := f.keyPaths(); !slices.Equal(got, []string{flag}) {
		t.Errorf("key paths %v, want the flag's path uncleaned %v (the sandbox resolves it)", got, []string{flag})
	}
	if got := f.secretPaths(); !slices.Equal(got, []string{want}) {
		t.Errorf("state secrets %v, want %v (the file opened through the link)", got, []string{want})
	}
}
