//go:build linux

package sandbox

import (
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// capSysAdmin is CAP_SYS_ADMIN's bit.
const capSysAdmin = 21

// Probe reads what this machine enforces: the kernel's Landlock ABI
// (landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION) and
// whether this process holds CAP_SYS_ADMIN (namespaces).
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
	return c
}
