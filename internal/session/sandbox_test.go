package session

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/config"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
)

// TestPrivateTmp_ASwappedLinkIsRemovedNotItsTarget: a private TMPDIR an
// agent replaced by a link to another directory (it can, where it may
// write the temp dir) is removed as a link after the proof: the directory
// it points to survives (fresh-user trial: the sidecar deleted its own
// state dir that way).
func TestPrivateTmp_ASwappedLinkIsRemovedNotItsTarget(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.MkdirAll(filepath.Join(victim, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(launch.PrivateTmpParent(), launch.TmpPrefix("s1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, dir); err != nil {
		t.Fatal(err)
	}
	s := &Actor{m: &Shared{Config: config.Config{Logger: zap.NewNop()}, Sandboxes: &registry.Sandboxes{}}}
	s.end.tmpDir = dir
	s.releaseSandbox()
	if _, err := os.Lstat(dir); err == nil {
		t.Error("the link is still there")
	}
	if _, err := os.Stat(filepath.Join(victim, "sessions")); err != nil {
		t.Fatalf("the link's target was removed: %v", err)
	}
}
