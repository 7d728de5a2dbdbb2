package main

import (
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
