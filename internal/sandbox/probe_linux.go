//go:build linux

package sandbox

import (
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// capSysAdmin is CAP_SYS_ADMIN's bit.
const capSysAdmin = 21

// Probe reads what this machine enforces: the kernel's Landlock ABI
// (landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION), whether
// this process holds CAP_SYS_ADMIN (namespaces), whether procfs takes
// the "pidns" mount option (a fresh /proc of a PID namespace mounted by
// a process outside it: fsconfig on an unattached context, nothing
// mounted), and whether seccomp filters exist (PR_GET_SECCOMP).
func Probe() Caps {
	var c Caps
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		c.Reason = "Landlock unavailable: " + err.Error()
	} else {
		c.LandlockABI = v
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) == nil {
		c.Namespaces = data[0].Effective&(1<<capSysAdmin) != 0
	}
	c.PIDNamespace, c.ProcessesReason = probePIDNamespace(c.Namespaces)
	_, err = unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	c.Seccomp = err == nil
	return c
}

// probePIDNamespace reports whether a launcher can mount a fresh /proc
// for a tree's PID namespace from outside it, and why not.
func probePIDNamespace(namespaces bool) (bool, string) {
	if !namespaces {
		return false, "a PID namespace needs CAP_SYS_ADMIN"
	}
	ns, err := unix.Open("/proc/self/ns/pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, "/proc/self/ns/pid: " + err.Error()
	}
	defer unix.Close(ns)
	fs, err := unix.Fsopen("proc", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return false, "fsopen(proc): " + err.Error()
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetFd(fs, "pidns", ns); err != nil {
		return false, "this kernel's procfs has no pidns mount option (Linux 6.18 has it): " + err.Error()
	}
	return true, ""
}
