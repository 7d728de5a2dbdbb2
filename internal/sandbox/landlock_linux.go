//go:build linux

package sandbox

import (
	"errors"
	"fmt"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// rulesetFD builds p's Landlock ruleset from descriptors it opens itself
// (go-landlock's path rules open paths following links): each rule path
// is opened O_PATH with openat2 RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
// from /, so a link anywhere on it fails the open (ELOOP), and, when the
// rule carries an identity (Rule.Dev, Rule.Ino), checked to be that very
// file, then handed to landlock_add_rule as the rule's parent fd. The
// returned ruleset fd is close-on-exec; the caller restricts itself with
// it or hands it to the launch entry. Errors wrap ErrRuleMoved for a
// rule path that moved, else the errno of the step.
func rulesetFD(p *Plan) (int, error) {
	attr := ll.RulesetAttr{HandledAccessFS: p.HandledFS, HandledAccessNet: p.HandledNet, Scoped: p.Scoped}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return -1, fmt.Errorf("landlock ruleset: %w", err)
	}
	fail := func(err error) (int, error) {
		unix.Close(fd)
		return -1, err
	}
	for _, r := range p.FS {
		pfd, err := openRule(r)
		if err != nil {
			return fail(err)
		}
		err = ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: r.Access, ParentFd: pfd}, 0)
		unix.Close(pfd)
		if err != nil {
			return fail(fmt.Errorf("landlock rule %s: %w", r.Path, err))
		}
	}
	for _, port := range p.ConnectTCP {
		if err := ll.LandlockAddNetPortRule(fd, &ll.NetPortAttr{AllowedAccess: AccessNetConnectTCP, Port: uint64(port)}, 0); err != nil {
			return fail(fmt.Errorf("landlock port %d: %w", port, err))
		}
	}
	return fd, nil
}

// openRule opens r's path without following any link and checks its
// identity (see rulesetFD).
func openRule(r Rule) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, r.Path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if errors.Is(err, unix.ENOSYS) {
		// No openat2 (Linux < 5.6): the last component at least.
		fd, err = unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	}
	if errors.Is(err, unix.ELOOP) {
		return -1, &RuleMovedError{Path: r.Path, Why: "has a link on its path"}
	}
	if err != nil {
		return -1, fmt.Errorf("landlock rule %s: open: %w", r.Path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("landlock rule %s: fstat: %w", r.Path, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(fd)
		return -1, &RuleMovedError{Path: r.Path, Why: "is a link"}
	}
	if (r.Dev != 0 || r.Ino != 0) && (st.Dev != r.Dev || st.Ino != r.Ino) {
		unix.Close(fd)
		return -1, &RuleMovedError{Path: r.Path, Why: "is another file now"}
	}
	return fd, nil
}

// restrictSelf enforces the ruleset fd on the calling thread.
func restrictSelf(fd int) error {
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// RestrictSelf enforces a ruleset fd handed over by a launcher (the
// launch entry's landlock=<fd>) on the calling thread and closes it;
// no_new_privs must be set (the launcher's thread set it before the
// fork). Errors wrap the errno.
func RestrictSelf(fd int) error {
	defer unix.Close(fd)
	return restrictSelf(fd)
}
