//go:build linux

package reaper

import (
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/procfs"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// signalPinned is the one "pin, re-check, signal" step of this package
// (docs/rules.md#r22), procfs.SignalPinned on reaper's types: sig goes
// through a pidfd on k.pid only if that pid still has k's start time (0:
// any) and belongs (nil: no further check) accepts it. A process already
// gone is not an error. It reports whether the signal was sent; errors
// name the pid ("pid 12: ...").
func signalPinned(k procKey, sig unix.Signal, belongs func(pid int, p procInfo) bool) (bool, error) {
	var b func(int, procfs.Info) bool
	if belongs != nil {
		b = func(pid int, p procfs.Info) bool { return belongs(pid, fromProcfs(p)) }
	}
	return procfs.SignalPinned(procfs.Key{Pid: k.pid, Start: k.start}, sig, b)
}

// inCgroup is a belongs check for signalPinned: the process is in the
// cgroup rel (as /proc/<pid>/cgroup shows it) or below it.
func inCgroup(rel string) func(int, procInfo) bool {
	return func(pid int, _ procInfo) bool {
		cg, ok := readCgroupV2(pid)
		return ok && cgroup.Within(cg, rel)
	}
}
