//go:build linux

package sandbox

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/osthread"
)

// Start applies p on a new OS thread locked for good (namespaces,
// no_new_privs, capabilities, seccomp filters and the Landlock domain are
// all per thread, inherited by a child the thread forks and kept across
// execve) and forks from that thread, so the agent's first instruction
// runs inside the whole sandbox; the thread then ends with its
// goroutine, and the runtime ends the restricted thread with it (nothing
// else ever runs on it). In order (docs/architecture.md, "Kernel
// sandbox"): unshare the mount, PID and network namespaces the plan
// needs, or join the network namespace JoinNetNS names; make / private
// (nothing propagates back); fork the PID namespace's init (Forks.Init),
// mount a fresh /proc of that namespace over /proc (procfs pidns=,
// nosuid, nodev, noexec) and a fresh tmpfs on /dev/shm; bind every Pin
// directory onto itself, every ReadOnly path read-only and every
// ReadWrite path read-write again; leave /dev opening only Devices
// (NoDev: devicesOnly); hide every Mask path (maskPath); mount /
// over itself (DenyUserNS); bring the loopback up; then, after every
// mount, set no_new_privs, drop every capability (DropCaps: securebits
// locked, bounding, ambient, capset, verified), load the seccomp filter,
// build the Landlock ruleset from descriptors opened without following
// links (rulesetFD) and enforce it, and fork the agent (Forks.Agent).
// An empty p forks the agent with nothing applied.
//
// Errors wrap ErrStep, the step ("namespaces", "join network namespace",
// "mount namespace", "proc", "shm", "pin /x", "bind /x read-only",
// "bind /x read-write", "devices", "mask /x", "deny user namespaces", "loopback",
// "no_new_privs", "capabilities", "seccomp", "landlock") and its errno
// (ErrRuleMoved for a rule path that moved), or are Forks' own errors
// as they returned them.
func Start(p *Plan, f Forks) (Started, error) {
	var st Started
	var err error
	// Never the main thread, never unlocked: the thread, with the
	// namespaces, Landlock domain and dropped capabilities it took on,
	// ends with the work (internal/osthread).
	osthread.RunLockedOffMain(func() { st, err = start(p, f) })
	return st, err
}

// stepError wraps err as Start's error for step.
func stepError(step string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrStep, step, err)
}

func start(p *Plan, f Forks) (st Started, err error) {
	if p.Empty() {
		st.AgentPid, err = f.Agent(-1)
		return st, err
	}
	flags := 0
	if p.NewMountNS() {
		flags |= unix.CLONE_NEWNS
	}
	if p.NewPIDNS {
		flags |= unix.CLONE_NEWPID | unix.CLONE_NEWIPC
	}
	if p.NewNetNS {
		flags |= unix.CLONE_NEWNET
	}
	if flags != 0 {
		if err := unix.Unshare(flags); err != nil {
			return st, stepError("namespaces", err)
		}
	}
	if p.JoinNetNS > 0 {
		// Before the init and the agent are forked: both are born in it.
		if err := unix.Setns(p.JoinNetNS, unix.CLONE_NEWNET); err != nil {
			return st, stepError("join network namespace", err)
		}
	}
	if p.NewMountNS() {
		// Nothing done here may propagate back to the launcher's mounts.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return st, stepError("mount namespace: make / private", err)
		}
	}
	if p.NewPIDNS {
		if st.InitPid, err = f.Init(); err != nil {
			return st, err
		}
		if err := mountProc(st.InitPid); err != nil {
			return st, stepError("proc", err)
		}
		if err := mountShm(); err != nil {
			return st, stepError("shm", err)
		}
	}
	for _, d := range p.Pin {
		if err := unix.Mount(d, d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return st, stepError("pin "+d, err)
		}
	}
	for _, d := range p.ReadOnly {
		if err := bindReadOnly(d); err != nil {
			return st, stepError("bind "+d+" read-only", err)
		}
	}
	for _, d := range p.ReadWrite {
		if err := bindFlags(d, false); err != nil {
			return st, stepError("bind "+d+" read-write", err)
		}
	}
	if p.NoDev {
		if err := devicesOnly(); err != nil {
			return st, stepError("devices", err)
		}
	}
	for _, d := range p.Mask {
		if err := maskPath(d); err != nil {
			return st, stepError("mask "+d, err)
		}
	}
	if p.DenyUserNS {
		// The thread's root stays the mount beneath: to the kernel its
		// children are then chrooted, and create_user_ns refuses them
		// (EPERM), clone3 included, which no filter can read.
		if err := unix.Mount("/", "/", "", unix.MS_BIND, ""); err != nil {
			return st, stepError("deny user namespaces", err)
		}
	}
	if p.NewNetNS {
		if err := loopbackUp(); err != nil {
			return st, stepError("loopback", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return st, stepError("no_new_privs", err)
	}
	if p.DropCaps {
		if err := dropCaps(); err != nil {
			return st, stepError("capabilities", err)
		}
	}
	if p.Seccomp {
		if err := loadSeccomp(); err != nil {
			return st, stepError("seccomp", err)
		}
	}
	ruleset := -1
	if p.Landlocks() {
		if ruleset, err = rulesetFD(p); err != nil {
			return st, stepError("landlock", err)
		}
		defer unix.Close(ruleset)
		if !f.EntryLandlock {
			if err := restrictSelf(ruleset); err != nil {
				return st, stepError("landlock", err)
			}
			ruleset = -1
		}
	}
	if st.AgentPid, err = f.Agent(ruleset); err != nil {
		return st, err
	}
	return st, nil
}

// mountProc mounts a procfs of init's PID namespace over /proc: its
// processes only, nosuid, nodev, noexec. init is a pid as the calling
// thread's current /proc (the launcher's) names it.
func mountProc(init int) error {
	ns, err := unix.Open("/proc/"+strconv.Itoa(init)+"/ns/pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(ns)
	fs, err := unix.Fsopen("proc", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetFd(fs, "pidns", ns); err != nil {
		return err
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return err
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(m)
	return unix.MoveMount(m, "", unix.AT_FDCWD, "/proc", unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// bindReadOnly bind mounts d (a directory or a file) onto itself and
// remounts the bind read-only, keeping the flags its mount already has
// (nosuid, nodev, noexec) so the remount is allowed.
func bindReadOnly(d string) error { return bindFlags(d, true) }

// bindFlags bind mounts d onto itself and remounts the bind read-only
// (ro) or read-write — a bind inside a read-only one starts read-only —
// keeping the other flags its mount has.
func bindFlags(d string, ro bool) error {
	if err := unix.Mount(d, d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(d, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT)
	if ro {
		flags |= unix.MS_RDONLY
	}
	for _, f := range []struct{ st, ms uintptr }{{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME}} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	return unix.Mount("", d, "", flags, "")
}

// loopbackUp sets IFF_UP on "lo" in the current network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// mountShm mounts a fresh tmpfs (mode 1777, nosuid, nodev) over /dev/shm
// where there is one: POSIX shared memory of the tree's own, as its IPC
// namespace holds its System V objects (found by an adversarial trial: a
// tree removed the host's 0600 segments and two sessions passed data
// through both). Its pages are charged to the tree's cgroup.
func mountShm() error {
	var st unix.Stat_t
	if err := unix.Lstat(DevShm, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	return unix.Mount("tmpfs", DevShm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
}
