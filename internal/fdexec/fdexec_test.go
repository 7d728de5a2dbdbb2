//go:build linux

package fdexec

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// placed opens name at descriptor number at (closed with the test).
func placed(t *testing.T, name string, flag, at int) int {
	t.Helper()
	fd, err := unix.Open(name, flag|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup3(fd, at, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	t.Cleanup(func() { unix.Close(at) })
	return at
}

// waitExit reaps pid and returns its exit status.
func waitExit(t *testing.T, pid int) int {
	t.Helper()
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	return ws.ExitStatus()
}

// TestForkExec_DescriptorAboveFilesIsNotReplaced: the program's descriptor
// sits on the number just above the highest of attr.Files, where the
// child's shuffle puts its error pipe. syscall.ForkExec then executes the
// pipe (EACCES); ForkExec runs the program.
func TestForkExec_DescriptorAboveFilesIsNotReplaced(t *testing.T) {
	prog := placed(t, "/bin/true", unix.O_RDONLY, 301)
	null := placed(t, os.DevNull, unix.O_RDWR, 300)
	attr := &syscall.ProcAttr{Files: []uintptr{uintptr(null), uintptr(null), uintptr(null)}}
	path := "/proc/self/fd/" + strconv.Itoa(prog)
	argv := []string{"true"}

	if pid, err := syscall.ForkExec(path, argv, attr); err == nil {
		waitExit(t, pid)
		t.Fatal("syscall.ForkExec ran the program: the hazard this package avoids is not reproduced")
	} else if !errors.Is(err, unix.EACCES) {
		t.Fatalf("syscall.ForkExec: %v, want EACCES (the error pipe executed)", err)
	}
	pid, err := ForkExec(path, argv, attr)
	if err != nil {
		t.Fatalf("ForkExec: %v", err)
	}
	if st := waitExit(t, pid); st != 0 {
		t.Fatalf("the program exited %d", st)
	}
	// The duplicate is closed again: fd 301 is the only one on the file.
	if _, err := unix.FcntlInt(uintptr(prog), unix.F_GETFD, 0); err != nil {
		t.Fatalf("the original descriptor: %v", err)
	}
}

// TestSafePath_LeavesOtherPathsAlone: a plain path, the child's own
// descriptor (an index of attr.Files), a descriptor already in attr.Files
// and one far above the shuffle are executed as named.
func TestSafePath_LeavesOtherPathsAlone(t *testing.T) {
	attr := &syscall.ProcAttr{Files: []uintptr{0, 1, 2, 9}}
	for _, p := range []string{"/bin/true", "/proc/self/fd/3", "/proc/self/fd/9", "/proc/self/fd/900", "/proc/self/fd/x"} {
		got, done, err := SafePath(p, attr)
		done()
		if err != nil || got != p {
			t.Errorf("SafePath(%q) = %q, %v; want it unchanged", p, got, err)
		}
	}
}
