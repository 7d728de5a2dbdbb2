//go:build linux

package sandbox

import (
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// SeccompDenied are the system calls the seccomp filter answers EPERM
// (docs/protocol.md §19; the design's PROTOCOL §10.3 lists the minimum):
// rebooting and kexec, kernel modules, setting the clock, the mount
// family, swap, bpf, perf events, userfaultfd, the kernel keyrings,
// ptrace and the calls that read or write another process's memory or
// descriptors, setns, io_uring (whose operations bypass this filter),
// opening files by handle (the classic container escape) and process
// accounting. Most of them also need a capability a tree with
// capabilities "none" lacks; the filter holds for a tree that keeps them
// (capabilities "keep") and for those that need none (keyrings, ptrace
// of a sibling, userfaultfd, io_uring, setns of an owned namespace).
var SeccompDenied = []string{
	"reboot", "kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module",
	"clock_settime", "clock_adjtime", "settimeofday", "adjtimex",
	"mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	"swapon", "swapoff",
	"bpf", "perf_event_open", "userfaultfd",
	"add_key", "request_key", "keyctl",
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
	"setns",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"open_by_handle_at", "acct",
}

// SeccompDeniedFlags are the calls the filter answers EPERM when an
// argument has a bit set: unshare and clone asking for a new user
// namespace (clone3 passes its flags in memory, which a filter cannot
// read; Plan.DenyUserNS covers it).
var SeccompDeniedFlags = map[string]uint64{"unshare": unix.CLONE_NEWUSER, "clone": unix.CLONE_NEWUSER}

// seccompPrograms are the two filters loaded, assembled once: the
// policy (SeccompDenied, SeccompDeniedFlags) and the architecture check
// (a system call of another ABI — i386 int 0x80 or x32 on x86-64 — gets
// ENOSYS; the policy alone would let another architecture's calls
// through).
var seccompPrograms = sync.OnceValues(func() ([2]*syscall.SockFprog, error) {
	var out [2]*syscall.SockFprog
	group := seccomp.SyscallGroup{Names: SeccompDenied, Action: seccomp.ActionErrno | seccomp.Action(unix.EPERM)}
	for name, bit := range SeccompDeniedFlags {
		group.NamesWithCondtions = append(group.NamesWithCondtions, seccomp.NameWithConditions{Name: name,
			Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: bit}}})
	}
	pol := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: []seccomp.SyscallGroup{group}}
	insts, err := pol.Assemble()
	if err != nil {
		return out, err
	}
	if out[0], err = fprog(insts); err != nil {
		return out, err
	}
	info, err := arch.GetInfo("")
	if err != nil {
		return out, err
	}
	const archOffset = 4 // seccomp_data.arch
	if out[1], err = fprog([]bpf.Instruction{
		bpf.LoadAbsolute{Off: archOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionErrno) | uint32(unix.ENOSYS)},
		bpf.RetConstant{Val: uint32(seccomp.ActionAllow)},
	}); err != nil {
		return out, err
	}
	return out, nil
})

// fprog assembles insts into a sock_fprog.
func fprog(insts []bpf.Instruction) (*syscall.SockFprog, error) {
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return nil, err
	}
	f := make([]syscall.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = syscall.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return &syscall.SockFprog{Len: uint16(len(f)), Filter: &f[0]}, nil
}

// loadSeccomp installs both filters on the calling thread only (no
// TSYNC: the launcher's other threads stay unfiltered; the thread's
// children inherit them). no_new_privs must already be set.
func loadSeccomp() error {
	progs, err := seccompPrograms()
	if err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	for _, p := range progs {
		if _, _, e := syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(p))); e != 0 {
			return e
		}
	}
	return nil
}
