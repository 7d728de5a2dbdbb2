//go:build linux

package sandbox

import (
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// newTestNetNS makes a network namespace on a thread of its own (which
// dies with its goroutine) and returns a descriptor of it.
func newTestNetNS(t *testing.T) int {
	t.Helper()
	fdc := make(chan int, 1)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		fdc <- fd
	}()
	select {
	case fd := <-fdc:
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	case err := <-errc:
		t.Skipf("no network namespace here: %v", err)
	}
	return -1
}

// TestStart_JoinNetNS: a plan with JoinNetNS forks the agent into that
// network namespace (docs/protocol.md §19.1: the tree joins the one its
// allow list's egress made), and the launcher keeps its own.
func TestStart_JoinNetNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setns needs CAP_SYS_ADMIN")
	}
	fd := newTestNetNS(t)
	want, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Readlink("/proc/thread-self/ns/net")
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	attr := &syscall.ProcAttr{Env: []string{"PATH=/usr/bin:/bin"}, Files: []uintptr{0, outW.Fd(), 2}}
	st, err := Start(&Plan{JoinNetNS: fd}, Forks{Agent: func(int) (int, error) {
		return syscall.ForkExec("/bin/sh", []string{"sh", "-c", "readlink /proc/self/ns/net"}, attr)
	}})
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(outR)
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(st.AgentPid, &ws, 0, nil)
	if got := strings.TrimSpace(string(out)); got != want || got == host {
		t.Errorf("the agent is in %q; want the joined %q (the launcher's is %q)", got, want, host)
	}
	if now, _ := os.Readlink("/proc/thread-self/ns/net"); now != host {
		t.Errorf("the calling thread moved to %q", now)
	}
	if (&Plan{JoinNetNS: fd}).Empty() {
		t.Error("a plan that joins a namespace reports Empty")
	}
}
