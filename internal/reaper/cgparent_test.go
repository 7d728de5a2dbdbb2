//go:build linux

package reaper

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// TestSupervisor_CgroupParentMadeIsRemoved: a --cgroup-parent below a
// directory that does not exist makes both, and Close removes both (it
// left the outer one behind; found by a fresh-user trial). A parent below
// the mount's root is refused by CheckCgroupParent without making
// anything.
func TestSupervisor_CgroupParentMadeIsRemoved(t *testing.T) {
	mount, err := cgroup.Mount()
	if err != nil {
		t.Skipf("no cgroup v2: %v", err)
	}
	outer := filepath.Join(mount, "acpx-test-parent-"+strconv.Itoa(os.Getpid()))
	parent := filepath.Join(outer, "deeper")
	if err := CheckCgroupParent(parent); err != nil {
		t.Fatalf("CheckCgroupParent(%s): %v", parent, err)
	}
	if _, err := os.Stat(outer); !os.IsNotExist(err) {
		t.Fatalf("CheckCgroupParent made %s (%v)", outer, err)
	}
	if err := CheckCgroupParent("/nonexistent/x"); err == nil {
		t.Fatal("CheckCgroupParent accepted a parent outside the cgroup2 mount")
	}
	s, err := newSupervisor(Options{Mode: ModeCgroup, CgroupParent: parent})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(parent); _ = os.Remove(outer) })
	if _, err := os.Stat(parent); err != nil {
		t.Fatalf("parent not made: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{parent, outer} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left after Close (%v)", d, err)
		}
	}
}
