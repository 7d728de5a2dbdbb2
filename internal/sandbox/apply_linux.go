//go:build linux

package sandbox

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Apply enforces p on the calling OS thread, which must be locked
// (runtime.LockOSThread, never unlocked) and must be the one that then
// execve's the agent: namespaces, no_new_privs and the Landlock domain
// are per thread, and execve carries them into the agent and everything
// it starts. In order: a private mount namespace with p.ReadOnly bind
// mounted read-only (before Landlock, which forbids mounting), a new
// network namespace with its loopback up, then PR_SET_NO_NEW_PRIVS and
// landlock_restrict_self with one ruleset built by go-landlock at p's
// exact access rights (no best-effort downgrade: a kernel that lacks a
// right fails here). An empty p does nothing.
//
// Errors name the step ("mount namespace", "bind /x read-only",
// "network namespace", "loopback", "landlock ruleset",
// "no_new_privs", "landlock_restrict_self") and wrap the errno.
func Apply(p *Plan) error {
	if p.Empty() {
		return nil
	}
	if len(p.ReadOnly) > 0 {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("mount namespace: %w", err)
		}
		// Nothing done here may propagate back to the sidecar's mounts.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("mount namespace: make / private: %w", err)
		}
		for _, d := range p.ReadOnly {
			if err := bindReadOnly(d); err != nil {
				return fmt.Errorf("bind %s read-only: %w", d, err)
			}
		}
	}
	if p.NewNetNS {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("network namespace: %w", err)
		}
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("loopback: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if !p.Landlocks() {
		return nil
	}
	cfg := landlock.Config{HandledAccessFS: landlock.AccessFSSet(p.HandledFS),
		HandledAccessNet: landlock.AccessNetSet(p.HandledNet), Scoped: landlock.ScopedSet(p.Scoped)}
	var rules []landlock.Rule
	for _, r := range p.FS {
		rules = append(rules, landlock.PathAccess(landlock.AccessFSSet(r.Access), r.Path))
	}
	for _, port := range p.ConnectTCP {
		rules = append(rules, landlock.ConnectTCP(port))
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return fmt.Errorf("landlock ruleset: nothing to enforce")
	}
	defer unix.Close(fd)
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// bindReadOnly bind mounts d (a directory or a file) onto itself and
// remounts the bind read-only, keeping the flags its mount already has
// (nosuid, nodev, noexec) so the remount is allowed.
func bindReadOnly(d string) error {
	if err := unix.Mount(d, d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(d, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
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
