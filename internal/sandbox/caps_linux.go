//go:build linux

package sandbox

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Securebits (linux/securebits.h): uid 0 gets no capabilities from
// execve (NOROOT), changing uids never adjusts capabilities
// (NO_SETUID_FIXUP), capabilities are not kept across setuid
// (KEEP_CAPS stays off, locked) and no ambient capability may be raised
// (NO_CAP_AMBIENT_RAISE); each locked so nothing in the tree can undo
// it.
const (
	secbitNoRoot                  = 1 << 0
	secbitNoRootLocked            = 1 << 1
	secbitNoSetuidFixup           = 1 << 2
	secbitNoSetuidFixupLocked     = 1 << 3
	secbitKeepCapsLocked          = 1 << 5
	secbitNoCapAmbientRaise       = 1 << 6
	secbitNoCapAmbientRaiseLocked = 1 << 7

	// LockedSecurebits is what a tree with capabilities "none" runs
	// with (its /proc/self/status shows no capability in any set).
	LockedSecurebits = secbitNoRoot | secbitNoRootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
		secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLocked
)

// capSetPCap is CAP_SETPCAP's bit: needed to set securebits and to drop
// from the bounding set.
const capSetPCap = 8

// maxCap bounds the capability numbers tried (the kernel answers EINVAL
// past its last one, /proc/sys/kernel/cap_last_cap).
const maxCap = 63

// dropCaps empties every capability set of the calling thread, in the
// order of Codex's linux-sandbox (capabilities.rs): no_new_privs (set by
// the caller), securebits locked, the bounding set, the ambient set, then
// capset of effective, permitted and inheritable to nothing, and verifies
// the result (verifyNoCaps). A thread that never held CAP_SETPCAP (a
// sidecar that is not root) cannot lock securebits nor shrink its
// bounding set; its permitted set is already empty and no_new_privs
// keeps execve from granting any, which verifyNoCaps accepts. Errors
// name the step.
func dropCaps() error {
	had, err := currentCaps()
	if err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	setpcap := had[0].Effective&(1<<capSetPCap) != 0
	if setpcap {
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, LockedSecurebits, 0, 0, 0); err != nil {
			return fmt.Errorf("securebits: %w", err)
		}
		for c := 0; c <= maxCap; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
				if errors.Is(err, unix.EINVAL) {
					break // past the kernel's last capability
				}
				return fmt.Errorf("bounding set: drop %d: %w", c, err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("ambient set: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return verifyNoCaps(setpcap)
}

// verifyNoCaps checks the calling thread holds nothing: effective,
// permitted, inheritable and ambient empty, no_new_privs set, and — when
// it could (bounding: it held CAP_SETPCAP) — an empty bounding set and
// the locked securebits. Errors name what is still held.
func verifyNoCaps(bounding bool) error {
	c, err := currentCaps()
	if err != nil {
		return fmt.Errorf("verify: capget: %w", err)
	}
	for i := range c {
		if c[i].Effective|c[i].Permitted|c[i].Inheritable != 0 {
			return fmt.Errorf("verify: capabilities still held: effective %#x permitted %#x inheritable %#x",
				c[i].Effective, c[i].Permitted, c[i].Inheritable)
		}
	}
	for n := 0; n <= maxCap; n++ {
		amb, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(n), 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break
		}
		if err != nil || amb != 0 {
			return fmt.Errorf("verify: ambient capability %d still set (%v)", n, err)
		}
		if !bounding {
			continue
		}
		if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(n), 0, 0, 0); err != nil || in != 0 {
			return fmt.Errorf("verify: capability %d still in the bounding set (%v)", n, err)
		}
	}
	if nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || nnp != 1 {
		return fmt.Errorf("verify: no_new_privs not set (%v)", err)
	}
	if bounding {
		if bits, err := unix.PrctlRetInt(unix.PR_GET_SECUREBITS, 0, 0, 0, 0); err != nil || bits&LockedSecurebits != LockedSecurebits {
			return fmt.Errorf("verify: securebits %#x, want %#x locked (%v)", bits, LockedSecurebits, err)
		}
	}
	return nil
}

// currentCaps is capget(2) of the calling thread (both 32-bit halves).
func currentCaps() ([2]unix.CapUserData, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	err := unix.Capget(&hdr, &data[0])
	return data, err
}
