package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSandbox_OwnTreeHasItsOwnIPCAndShm: a tree with processes own-tree
// (the default with a filesystem sandbox) has a System V IPC namespace and
// a /dev/shm of its own: it can neither remove nor see the host's 0600
// shared-memory segment, and what it writes to /dev/shm is neither on the
// host's nor seen by another session's tree, and is gone with the tree
// (found by an adversarial trial: a root agent removed the host's
// segments, and two sessions passed data through both).
func TestSandbox_OwnTreeHasItsOwnIPCAndShm(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	requireRootLayers(t, s)
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
	if err != nil {
		t.Fatalf("host segment: %v", err)
	}
	t.Cleanup(func() { _, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
	name := "acpx-e2e-shm-" + randHex(6)
	t.Cleanup(func() { _ = os.Remove("/dev/shm/" + name) })
	var a, b openResult
	s.mustCall("session/open", e.openParams("ipc-a", "probe"), &a)
	s.mustCall("session/open", e.openParams("ipc-b", "probe"), &b)
	ids := strconv.Itoa(id)
	got := probeTurn(t, s, a.Session, "a1", "exec ipcrm -m "+ids, "write /dev/shm/"+name, "exec ls /dev/shm")
	if got["exec ipcrm -m "+ids] == "ok " || got["exec ipcrm -m "+ids] == "ok" {
		t.Errorf("the tree removed the host's segment %d: %q", id, got["exec ipcrm -m "+ids])
	}
	if got["write /dev/shm/"+name] != "ok" {
		t.Errorf("write to the tree's /dev/shm: %q, want ok (its own tmpfs)", got["write /dev/shm/"+name])
	}
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &unix.SysvShmDesc{}); err != nil {
		t.Errorf("the host's segment %d is gone: %v", id, err)
	}
	if _, err := os.Stat("/dev/shm/" + name); !os.IsNotExist(err) {
		t.Errorf("the tree's /dev/shm file is on the host's /dev/shm (%v)", err)
	}
	got = probeTurn(t, s, b.Session, "b1", "exec ls /dev/shm/"+name)
	if r := got["exec ls /dev/shm/"+name]; !strings.HasPrefix(r, "exit ") {
		t.Errorf("another session's tree sees the file: %q", r)
	}
	closeAllClean(t, s, e, a.Session, b.Session)
}
