//go:build linux

package sandbox

import (
	"golang.org/x/sys/unix"
)

// maskAttrs are the mount attributes of a mask: nothing written through
// it (EROFS, chmod included), no device opened through it (EACCES), no
// set-id and nothing executed.
const maskAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC

// maskPath hides path (Plan.Mask) in the calling thread's mount
// namespace. The path is opened as a rule path is (openRule: no link
// anywhere on it, else a *RuleMovedError), and the mask is attached to
// that very descriptor (move_mount), so what is hidden is the file that
// was checked. A file gets a detached bind of /dev/null made read-only
// and nodev; a directory an empty tmpfs (mode 0) mounted read-only.
func maskPath(path string) error {
	target, err := openRule(Rule{Path: path})
	if err != nil {
		return err
	}
	defer unix.Close(target)
	var st unix.Stat_t
	if err := unix.Fstat(target, &st); err != nil {
		return err
	}
	var m int
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		m, err = emptyTmpfs()
	} else {
		m, err = nullBind()
	}
	if err != nil {
		return err
	}
	defer unix.Close(m)
	return unix.MoveMount(m, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

// nullBind is a detached bind mount of /dev/null with maskAttrs.
func nullBind() (int, error) {
	m, err := unix.OpenTree(unix.AT_FDCWD, "/dev/null", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1, err
	}
	if err := unix.MountSetattr(m, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: maskAttrs}); err != nil {
		unix.Close(m)
		return -1, err
	}
	return m, nil
}

// emptyTmpfs is a detached, empty tmpfs (mode 0, one page at most) with
// maskAttrs.
func emptyTmpfs() (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"mode", "0"}, {"size", "4096"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, err
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, err
	}
	return unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, maskAttrs)
}

// devicesOnly leaves the calling thread's mount namespace a /dev that
// opens only Devices (Plan.NoDev): /dev bound onto itself with its
// submounts (so it is a mount of its own even where it was a plain
// directory), each of Devices that is a device node bound onto itself,
// then the /dev mount alone set nodev. Its submounts (/dev/pts, /dev/shm)
// and the per-device binds keep their own attributes.
func devicesOnly() error {
	if err := unix.Mount("/dev", "/dev", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	for _, d := range Devices {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
			continue // absent, a link into /dev/pts, or a mount of its own (/dev/pts)
		}
		if err := unix.Mount(d, d, "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	return unix.MountSetattr(unix.AT_FDCWD, "/dev", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NODEV})
}
