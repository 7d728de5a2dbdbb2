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
// descriptor (an index of attr.Files), a descriptor already in attr.Files,
// one below the highest of attr.Files and one far above the shuffle are
// executed as named.
func TestSafePath_LeavesOtherPathsAlone(t *testing.T) {
	attr := &syscall.ProcAttr{Files: []uintptr{0, 1, 2, 9}}
	for _, p := range []string{"/bin/true", "/proc/self/fd/3", "/proc/self/fd/9", "/proc/self/fd/7", "/proc/self/fd/900", "/proc/self/fd/x"} {
		got, done, err := safePath(p, attr)
		done()
		if err != nil || got != p {
			t.Errorf("safePath(%q) = %q, %v; want it unchanged", p, got, err)
		}
	}
}

// TestSafePath_UnderALowDescriptorLimit: with RLIMIT_NOFILE too low for a
// number above the shuffle, the lowest free number is taken when it is
// out of reach, and EMFILE is the answer when it is not.
func TestSafePath_UnderALowDescriptorLimit(t *testing.T) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	prog := placed(t, "/bin/true", unix.O_RDONLY, 301)
	null := placed(t, os.DevNull, unix.O_RDWR, 300)
	lim := old
	lim.Cur = 304 // min would be 300+3+3 = 306
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	attr := &syscall.ProcAttr{Files: []uintptr{uintptr(null), uintptr(null), uintptr(null)}}
	got, done, err := safePath("/proc/self/fd/"+strconv.Itoa(prog), attr)
	defer done()
	if err != nil {
		t.Fatalf("safePath: %v (a free number below 300 is out of reach)", err)
	}
	if n, _ := strconv.Atoi(got[len("/proc/self/fd/"):]); n >= 300 {
		t.Fatalf("safePath = %s, want a number below the highest of attr.Files", got)
	}
	// With every number below 300 taken too, nothing is out of reach.
	lim.Cur = 302
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	attr.Files = []uintptr{uintptr(null), uintptr(null), uintptr(null), 3}
	var filled []int
	for {
		fd, err := unix.Dup(null)
		if err != nil || fd > 299 {
			if err == nil {
				unix.Close(fd)
			}
			break
		}
		filled = append(filled, fd)
	}
	defer func() {
		for _, fd := range filled {
			unix.Close(fd)
		}
	}()
	if _, done, err := safePath("/proc/self/fd/"+strconv.Itoa(prog), attr); !errors.Is(err, unix.EMFILE) {
		done()
		t.Fatalf("safePath with no free number out of reach: %v, want EMFILE", err)
	}
}
