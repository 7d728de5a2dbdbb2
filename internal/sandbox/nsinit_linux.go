//go:build linux

package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A tree with processes "own-tree" runs in a PID namespace whose init
// (pid 1 there) is a process of the sidecar's, not the agent: the agent
// is the launcher's own child (so its exit status is collected exactly
// as without a namespace), forked into the namespace after the init.
// The init reaps every process orphaned inside the namespace (their
// parent there is the init, not the sidecar) and, once its control pipe
// (fd 3) hits EOF — the launcher closes it when it has reaped the agent —
// exits as soon as it is alone, which empties the tree's cgroup. As a
// namespace init it ignores every signal it does not handle, from inside
// and outside; SIGKILL from outside (cgroup.kill, a pinned pidfd) ends it
// and the kernel then kills every process left in the namespace.
//
// The init is a program of raw system calls (nsinit_amd64.s) copied into
// a sealed memfd once per process and executed from there: a few pages
// per tree, no Go runtime. Where there is none (another architecture, a
// kernel that refuses to execute memfds: vm.memfd_noexec=2) the
// launcher's own image runs InitMain instead.

// InitName is argv[0] of every tree's init, and its comm (ps shows
// "acpx-init"); the proof lists the init as one of the tree's
// descendants.
const InitName = "acpx-init"

// InitArg is argv[1] of the fallback init: the sidecar binary's
// re-exec dispatch (launchexec.MaybeRun) runs InitMain for it.
const InitArg = "__nsinit"

// InitCtlFD is the init's control pipe (the read end): EOF when the
// launcher has reaped the agent or is gone.
const InitCtlFD = 3

var (
	initMemfd = sync.OnceValues(makeInitMemfd)
	// initExecFailed is set once executing the memfd failed: every later
	// init runs the fallback.
	initExecFailed atomic.Bool
)

// InitCommand is the path and argv a launcher executes as a tree's init:
// the memfd program (/proc/self/fd/<n>, argv [InitName]) when this
// process has one, else fallback (the sidecar's own image) with argv
// [InitName, InitArg]. fallback: whether it is the fallback.
func InitCommand(self string) (path string, argv []string, fallback bool) {
	if fd, err := initMemfd(); err == nil && !initExecFailed.Load() {
		return "/proc/self/fd/" + strconv.Itoa(fd), []string{InitName}, false
	}
	return self, []string{InitName, InitArg}, true
}

// InitExecFailed records that executing the memfd init failed (the
// launcher then retries with the fallback, and every later launch uses
// it).
func InitExecFailed() { initExecFailed.Store(true) }

// makeInitMemfd writes the init program as a static ELF into a memfd
// (close-on-exec, executable) and seals it against any change.
func makeInitMemfd() (int, error) {
	code := nsinitCode()
	if code == nil {
		return -1, errors.New("no init program for this architecture")
	}
	img := initELF(code)
	fd, err := unix.MemfdCreate(InitName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) { // before Linux 6.3: no MFD_EXEC, memfds are executable
		fd, err = unix.MemfdCreate(InitName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return -1, err
	}
	for off := 0; off < len(img); {
		n, err := unix.Write(fd, img[off:])
		if err != nil {
			unix.Close(fd)
			return -1, err
		}
		off += n
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals|unix.F_SEAL_EXEC); err != nil {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// initELF wraps code into a minimal static ELF64 executable for this
// architecture: the header, one PT_LOAD (read, execute) of the whole
// file at 0x400000 with the entry right after the headers, and a
// PT_GNU_STACK (read, write: no executable stack).
func initELF(code []byte) []byte {
	const base, ehsize, phsize = 0x400000, 64, 56
	const hdr = ehsize + 2*phsize
	var b bytes.Buffer
	w := func(vs ...any) {
		for _, v := range vs {
			_ = binary.Write(&b, binary.LittleEndian, v)
		}
	}
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little endian */, 1 /* version */, 0 /* System V */})
	b.Write(make([]byte, 8))
	w(uint16(2) /* ET_EXEC */, uint16(elfMachine), uint32(1), uint64(base+hdr), uint64(ehsize), uint64(0),
		uint32(0), uint16(ehsize), uint16(phsize), uint16(2), uint16(64), uint16(0), uint16(0))
	total := uint64(hdr + len(code))
	w(uint32(1) /* PT_LOAD */, uint32(5) /* R|X */, uint64(0), uint64(base), uint64(base), total, total, uint64(0x1000))
	w(uint32(0x6474e551) /* PT_GNU_STACK */, uint32(6) /* R|W */, uint64(0), uint64(0), uint64(0), uint64(0), uint64(0), uint64(16))
	b.Write(code)
	return b.Bytes()
}

// InitMain is the fallback init (see the block comment above), run by
// the launcher's own image as [InitName, InitArg]: undumpable, with the
// capability sets of its threads emptied where it can, ignoring every
// signal it is sent, reaping every child, and exiting once its control
// pipe (InitCtlFD) hit EOF and no other process is left in its
// namespace. It returns the process's exit status.
func InitMain([]string) int {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if name, err := unix.BytePtrFromString(InitName); err == nil {
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	_ = unix.Capset(&hdr, &none[0])
	signal.Ignore(unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE, unix.SIGALRM)
	sigch := make(chan os.Signal, 1)
	signal.Notify(sigch, unix.SIGCHLD)
	ctl := make(chan struct{})
	go func() {
		defer close(ctl)
		buf := make([]byte, 64)
		for {
			n, err := unix.Read(InitCtlFD, buf)
			if n <= 0 && !errors.Is(err, unix.EINTR) {
				return
			}
		}
	}()
	closed := false
	for {
		for {
			var ws unix.WaitStatus
			if pid, _ := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil); pid <= 0 {
				break
			}
		}
		if closed && errors.Is(unix.Kill(-1, 0), unix.ESRCH) {
			return 0
		}
		select {
		case <-sigch:
		case <-ctl:
			closed, ctl = true, nil
		}
	}
}
