//go:build linux

package main

import (
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rootProbe runs the probes of what a root agent must not do
// (docs/protocol.md §19: processes own-tree, capabilities none, the
// seccomp filter). Each is built so that, were it not refused, it would
// still do no harm: reboot with an invalid magic (EINVAL unfiltered, and
// its command only turns Ctrl-Alt-Del off), a bogus module image, the
// clock set to the time it already has, a tmpfs on a directory of the
// agent's own (unmounted at once), a user namespace in a child that exits
// at once. ok reports whether verb is one of them.
//
//	reboot                 reboot(2), invalid magic2
//	init_module            init_module(2) of a 16-byte non-ELF image
//	clock_settime          CLOCK_REALTIME set to its current value
//	mount <dir>            a 1 MiB tmpfs on dir (unmounted if it worked)
//	unshare-user           unshare(CLONE_NEWUSER)
//	clone3-user            clone3(CLONE_NEWUSER); the child exits at once
//	raw-socket             socket(AF_INET, SOCK_RAW, ICMP)
//	ptrace-child           PTRACE_SEIZE of a sleeping child of its own
//	chown <path> <uid>     chown(path, uid, -1)
//	syscall <name>         keyctl, io_uring_setup, setns, bpf,
//	                       perf_event_open, userfaultfd, swapon,
//	                       kexec_load, process_vm_readv with harmless
//	                       arguments
//	rename <old> <new>     rename(2)
//	mkdir <path>           mkdir(2), 0755
//	symlink <target> <at>  symlink(2)
//	double-fork            sh starts a sleep 300 in the background and
//	                       exits: the sleep is orphaned (to the tree's init)
//	caps                   "ok" and /proc/self/status's Cap*, NoNewPrivs
//	                       and Seccomp lines, space-separated
//	proc                   "ok" and the pids /proc lists, sorted
//	ps                     "ok" and the pids `ps -e` lists, sorted
func rootProbe(verb, arg string) (string, bool) {
	switch verb {
	case "reboot":
		_, _, e := unix.RawSyscall6(unix.SYS_REBOOT, unix.LINUX_REBOOT_MAGIC1, 1, unix.LINUX_REBOOT_CMD_CAD_OFF, 0, 0, 0)
		return errnoResult(e), true
	case "init_module":
		return result(unix.InitModule([]byte("not a module img"), "")), true
	case "clock_settime":
		var now unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_REALTIME, &now); err != nil {
			return result(err), true
		}
		_, _, e := unix.RawSyscall(unix.SYS_CLOCK_SETTIME, unix.CLOCK_REALTIME, uintptr(unsafe.Pointer(&now)), 0)
		return errnoResult(e), true
	case "mount":
		err := unix.Mount("tmpfs", arg, "tmpfs", 0, "size=1m")
		if err == nil {
			_ = unix.Unmount(arg, unix.MNT_DETACH)
		}
		return result(err), true
	case "unshare-user":
		_, _, e := unix.RawSyscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
		return errnoResult(e), true
	case "clone3-user":
		return clone3User(), true
	case "raw-socket":
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
		if err == nil {
			unix.Close(fd)
		}
		return result(err), true
	case "ptrace-child":
		return ptraceChild(), true
	case "chown":
		path, uid, _ := strings.Cut(arg, " ")
		n, err := strconv.Atoi(strings.TrimSpace(uid))
		if err != nil {
			return "bad uid", true
		}
		return result(os.Chown(path, n, -1)), true
	case "syscall":
		return harmlessSyscall(arg), true
	case "rename", "symlink":
		a, b, _ := strings.Cut(arg, " ")
		if verb == "rename" {
			return result(os.Rename(a, strings.TrimSpace(b))), true
		}
		return result(os.Symlink(a, strings.TrimSpace(b))), true
	case "mkdir":
		return result(os.Mkdir(arg, 0o755)), true
	case "double-fork":
		return result(exec.Command("sh", "-c", "sleep 300 </dev/null >/dev/null 2>&1 &").Run()), true
	case "caps":
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return result(err), true
		}
		var out []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Cap") || strings.HasPrefix(l, "NoNewPrivs:") || strings.HasPrefix(l, "Seccomp:") {
				out = append(out, strings.Join(strings.Fields(l), "="))
			}
		}
		return "ok " + strings.Join(out, " "), true
	case "proc":
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return result(err), true
		}
		var pids []int
		for _, e := range ents {
			if n, err := strconv.Atoi(e.Name()); err == nil {
				pids = append(pids, n)
			}
		}
		return "ok " + joinPids(pids), true
	case "ps":
		out, err := exec.Command("ps", "-e", "-o", "pid=").Output()
		if err != nil {
			return result(err), true
		}
		var pids []int
		for _, f := range strings.Fields(string(out)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		return "ok " + joinPids(pids), true
	}
	return "", false
}

// joinPids is pids sorted, space-separated.
func joinPids(pids []int) string {
	sort.Ints(pids)
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, " ")
}

// errnoResult is result of a raw system call's errno.
func errnoResult(e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	return result(e)
}

// clone3User asks clone3 for a child in a new user namespace; a child
// made exits at once without running any Go code, and is reaped.
func clone3User() string {
	args := struct {
		flags, pidfd, childTid, parentTid, exitSignal, stack, stackSize, tls uint64
	}{flags: unix.CLONE_NEWUSER, exitSignal: uint64(unix.SIGCHLD)}
	pid, _, e := unix.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0)
	if e != 0 {
		return result(e)
	}
	if pid == 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	var ws unix.WaitStatus
	_, _ = unix.Wait4(int(pid), &ws, 0, nil)
	return "ok"
}

// ptraceChild tries to seize a child of its own (a sibling of any other
// process of the tree) that sleeps, then ends it.
func ptraceChild() string {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		return result(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	time.Sleep(10 * time.Millisecond) // let it exec; the seize is refused either way
	const ptraceSeize = 0x4206
	_, _, e := unix.RawSyscall6(unix.SYS_PTRACE, ptraceSeize, uintptr(cmd.Process.Pid), 0, 0, 0, 0)
	return errnoResult(e)
}

// harmlessSyscall calls name with arguments that, unfiltered, fail or
// change nothing.
func harmlessSyscall(name string) string {
	var e syscall.Errno
	switch name {
	case "keyctl": // KEYCTL_GET_KEYRING_ID of the session keyring, no create
		_, _, e = unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, ^uintptr(2), 0)
	case "io_uring_setup":
		var params [120]byte
		var fd uintptr
		fd, _, e = unix.RawSyscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
		if e == 0 {
			unix.Close(int(fd))
		}
	case "setns":
		_, _, e = unix.RawSyscall(unix.SYS_SETNS, ^uintptr(0), 0, 0)
	case "bpf":
		_, _, e = unix.RawSyscall(unix.SYS_BPF, ^uintptr(0), 0, 0)
	case "perf_event_open":
		_, _, e = unix.RawSyscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0, 0)
	case "userfaultfd":
		var fd uintptr
		fd, _, e = unix.RawSyscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC, 0, 0)
		if e == 0 {
			unix.Close(int(fd))
		}
	case "swapon":
		p, _ := unix.BytePtrFromString("/nonexistent-swap")
		_, _, e = unix.RawSyscall(unix.SYS_SWAPON, uintptr(unsafe.Pointer(p)), 0, 0)
	case "kexec_load":
		_, _, e = unix.RawSyscall6(unix.SYS_KEXEC_LOAD, 0, 0, 0, ^uintptr(0), 0, 0)
	case "process_vm_readv":
		_, _, e = unix.RawSyscall6(unix.SYS_PROCESS_VM_READV, uintptr(os.Getpid()), 0, 0, 0, 0, 0)
	default:
		return "unknown syscall"
	}
	return errnoResult(e)
}
