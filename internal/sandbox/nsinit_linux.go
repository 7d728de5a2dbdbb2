//go:build linux

package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/procfs"
)

// A tree with processes "own-tree" runs in a PID namespace whose init
// (pid 1 there) is a process of the sidecar's, not the agent: the agent
// is the launcher's own child (so its exit status is collected exactly
// as without a namespace), forked into the namespace after the init.
// The init is the parent of every process orphaned inside the namespace
// (there the init, not the sidecar, is their subreaper), and reaps them
// only after the launcher has looked at each (its exit status in
// /proc/<pid>/stat): the proof names them as it named the orphans the
// sidecar reaped itself. As a namespace init it ignores every signal it
// does not handle, from inside and outside; SIGKILL from outside
// (cgroup.kill, a pinned pidfd) ends it, and the kernel then kills every
// process left in the namespace.
//
// The control socket (the init's fd InitCtlFD, a stream socketpair with
// the launcher), one byte at a time:
//
//	init → launcher  InitChildExited ('c'): a child of mine exited; I reap
//	                 it once you answer
//	launcher → init  InitAck ('a'): reap it
//	launcher → init  InitAgentReaped ('e'): the agent is reaped; leave once
//	                 the namespace holds no other process
//	EOF, an error    the launcher is gone: reap freely, leave when alone
//
// The init is a program of raw system calls (nsinit_amd64.s) copied into
// a sealed memfd once per process and executed from there: a few pages
// per tree, no Go runtime. Where there is none (another architecture, a
// kernel that refuses to execute memfds: vm.memfd_noexec=2) the
// launcher's own image runs InitMain instead.

// The control socket's bytes (see above).
const (
	InitChildExited = 'c'
	InitAck         = 'a'
	InitAgentReaped = 'e'
)

// InitName is argv[0] of every tree's init, and its comm (ps shows
// "acpx-init"); the proof lists the init as one of the tree's
// descendants.
const InitName = "acpx-init"

// InitArg is argv[1] of the fallback init: the sidecar binary's
// re-exec dispatch (launchexec.MaybeRun) runs InitMain for it.
const InitArg = "__nsinit"

// InitCtlFD is the init's end of its control socket.
const InitCtlFD = 3

var initMemfd = sync.OnceValues(makeInitMemfd)

// InitCommand is the path and argv a launcher executes as a tree's init:
// the memfd program (/proc/self/fd/<n>, argv [InitName]) when this
// process has one, else self (the sidecar's own image) with argv
// [InitName, InitArg]. fallback: whether it is the latter. A tree's init
// is the first process of its namespace: if it cannot start the
// namespace is gone, so the choice is made once, up front.
func InitCommand(self string) (path string, argv []string, fallback bool) {
	if fd, err := initMemfd(); err == nil {
		return "/proc/self/fd/" + strconv.Itoa(fd), []string{InitName}, false
	}
	return self, []string{InitName, InitArg}, true
}

// makeInitMemfd writes the init program as a static ELF into a memfd
// (close-on-exec, executable) and seals it against any change. It fails
// where there is no program for this architecture or the kernel refuses
// to execute memfds (vm.memfd_noexec = 2).
func makeInitMemfd() (int, error) {
	code := nsinitCode()
	if code == nil {
		return -1, errors.New("no init program for this architecture")
	}
	if b, err := os.ReadFile("/proc/sys/vm/memfd_noexec"); err == nil && strings.TrimSpace(string(b)) == "2" {
		return -1, errors.New("vm.memfd_noexec = 2: memfds are never executed")
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
// capability sets of its thread emptied where it can, ignoring every
// signal it is sent, announcing each exited child on its control socket
// before it reaps it, and exiting once the agent is reaped (or the
// launcher gone) and no other process is left in its namespace. It
// returns the process's exit status.
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
	// One reader of the socket: bytes reach the loop in order.
	in := make(chan byte, 16)
	go func() {
		defer close(in)
		var b [1]byte
		for {
			n, err := unix.Read(InitCtlFD, b[:])
			if n == 1 {
				in <- b[0]
			} else if !errors.Is(err, unix.EINTR) {
				return
			}
		}
	}()
	connected, agentGone := true, false
	take := func(b byte, ok bool) {
		switch {
		case !ok:
			connected, agentGone = false, true
		case b == InitAgentReaped:
			agentGone = true
		}
	}
	for {
		for {
			var info unix.Siginfo
			if unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil) != nil {
				break
			}
			pid := procfs.SiginfoPid(&info)
			if pid <= 0 {
				break
			}
			if connected {
				if _, err := unix.Write(InitCtlFD, []byte{InitChildExited}); err != nil {
					connected, agentGone = false, true
				}
				for connected {
					b, ok := <-in
					take(b, ok)
					if ok && b == InitAck {
						break
					}
				}
			}
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WALL, nil)
		}
		if agentGone && errors.Is(unix.Kill(-1, 0), unix.ESRCH) {
			return 0
		}
		if connected {
			select {
			case <-sigch:
			case b, ok := <-in:
				take(b, ok)
			}
		} else {
			<-sigch
		}
	}
}
