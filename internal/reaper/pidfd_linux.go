//go:build linux

package reaper

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// signalPinned is the one "pin, re-check, signal" step of this package
// (docs/rules.md#r22): it opens a pidfd on k.pid, which pins the process it
// names, re-reads that pid's /proc stat and sends sig through the pidfd
// only if the process still has k's start time (k.start 0: any) and
// belongs (nil: no further check) accepts it, so a recycled pid is never
// signalled. A process already gone is not an error. It reports whether
// the signal was sent; errors name the pid ("pid 12: ...").
func signalPinned(k procKey, sig unix.Signal, belongs func(pid int, p procInfo) bool) (bool, error) {
	fd, err := unix.PidfdOpen(k.pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("pid %d: pidfd_open: %v", k.pid, err)
	}
	defer unix.Close(fd)
	p, ok := readStat(k.pid)
	if !ok || k.start != 0 && p.start != k.start || belongs != nil && !belongs(k.pid, p) {
		return false, nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("pid %d: %v", k.pid, err)
	}
	return true, nil
}

// inCgroup is a belongs check for signalPinned: the process is in the
// cgroup rel (as /proc/<pid>/cgroup shows it) or below it.
func inCgroup(rel string) func(int, procInfo) bool {
	return func(pid int, _ procInfo) bool {
		cg, ok := readCgroupV2(pid)
		return ok && cgroupWithin(cg, rel)
	}
}
