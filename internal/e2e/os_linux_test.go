package e2e

import "golang.org/x/sys/unix"

// pipeBytes is how many bytes wait unread in the pipe fd (TIOCINQ).
func pipeBytes(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCINQ) }

// mountTmpfs mounts a tmpfs with opts on dir (nosuid, nodev).
func mountTmpfs(dir, opts string) error {
	return unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
}

// unmountTmpfs detaches the tmpfs at dir.
func unmountTmpfs(dir string) error { return unix.Unmount(dir, unix.MNT_DETACH) }
