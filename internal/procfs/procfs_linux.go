//go:build linux

// Package procfs is what both the sidecar's reaper and the guardian
// program (internal/guardian) read of /proc, and the one "pin, re-check,
// signal" step (docs/rules.md#r22) they both use.
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Info is what the sidecar needs of /proc/<pid>/stat.
type Info struct {
	PPid, Pgid, Sid int
	Start           uint64 // field 22, clock ticks since boot: the pid's identity
	State           byte   // field 3; 'Z' = zombie (not live)
}

// Key identifies one process: a pid plus its start time, so a recycled
// pid never matches (docs/rules.md#r22).
type Key struct {
	Pid   int
	Start uint64
}

// ParseStat parses the contents of /proc/<pid>/stat.
func ParseStat(b []byte) (Info, bool) {
	// comm (field 2) may contain spaces and ')'; the last ')' ends it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Info{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 {
		return Info{}, false
	}
	var p Info
	var err error
	p.State = f[0][0]
	if p.PPid, err = strconv.Atoi(f[1]); err != nil {
		return Info{}, false
	}
	if p.Pgid, err = strconv.Atoi(f[2]); err != nil {
		return Info{}, false
	}
	if p.Sid, err = strconv.Atoi(f[3]); err != nil {
		return Info{}, false
	}
	if p.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Info{}, false
	}
	return p, true
}

// ReadStat reads /proc/<pid>/stat; false if the process is gone.
func ReadStat(pid int) (Info, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Info{}, false
	}
	return ParseStat(b)
}

// Scan reads every process in /proc (pid -> Info).
func Scan() map[int]Info {
	out := make(map[int]Info, 256)
	d, err := os.Open("/proc")
	if err != nil {
		return out
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, ok := ReadStat(pid); ok {
			out[pid] = p
		}
	}
	return out
}

// SignalPinned opens a pidfd on k.Pid, which pins the process it names,
// re-reads that pid's /proc stat and sends sig through the pidfd only if
// the process still has k's start time (k.Start 0: any) and belongs (nil:
// no further check) accepts it, so a recycled pid is never signalled. A
// process already gone is not an error. It reports whether the signal
// was sent; errors name the pid ("pid 12: ...").
func SignalPinned(k Key, sig unix.Signal, belongs func(pid int, p Info) bool) (bool, error) {
	fd, err := unix.PidfdOpen(k.Pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("pid %d: pidfd_open: %v", k.Pid, err)
	}
	defer unix.Close(fd)
	p, ok := ReadStat(k.Pid)
	if !ok || k.Start != 0 && p.Start != k.Start || belongs != nil && !belongs(k.Pid, p) {
		return false, nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("pid %d: %v", k.Pid, err)
	}
	return true, nil
}

// SiginfoPid extracts si_pid from a siginfo filled by waitid: the union
// after three int32 fields, aligned to a pointer.
func SiginfoPid(info *unix.Siginfo) int {
	ps := unsafe.Sizeof(uintptr(0))
	off := (12 + ps - 1) / ps * ps
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}
