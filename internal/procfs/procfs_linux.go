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
	// PPid, Pgid and Sid are the parent pid, process group id and
	// session id (fields 4, 5 and 6).
	PPid, Pgid, Sid int
	Start           uint64 // field 22, clock ticks since boot: the pid's identity
	State           byte   // field 3; 'Z' = zombie (not live)
}

// Key identifies one process: a pid plus its start time, so a recycled
// pid never matches (docs/rules.md#r22).
type Key struct {
	// Pid is the process id.
	Pid int
	// Start is the process's start time (Info.Start); 0 matches any in
	// SignalPinned.
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

// Child is one child of a process as /proc shows it: its identity,
// whether it has exited (a zombie, not reaped yet) and, if so, its wait
// status (stat field 52, exit_code, in waitpid(2)'s form; readable by a
// process that may ptrace it).
type Child struct {
	Key
	// Exited: the child is a zombie, exited but not reaped yet.
	Exited bool
	// Status is an exited child's wait status; zero while it runs.
	Status unix.WaitStatus
}

// Children lists pid's children with /proc/<pid>/task/<pid>/children
// (pid's main thread: the only thread a single-threaded process has),
// each with Child's facts; a child gone meanwhile is left out.
func Children(pid int) []Child {
	p := strconv.Itoa(pid)
	b, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	if err != nil {
		return nil
	}
	var out []Child
	for _, f := range strings.Fields(string(b)) {
		cpid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + f + "/stat")
		if err != nil {
			continue
		}
		info, ok := ParseStat(st)
		if !ok {
			continue
		}
		c := Child{Key: Key{Pid: cpid, Start: info.Start}, Exited: info.State == 'Z'}
		if c.Exited {
			code, ok := exitCode(st)
			if !ok {
				continue // not readable: left to the caller's next look
			}
			c.Status = unix.WaitStatus(code)
		}
		out = append(out, c)
	}
	return out
}

// exitCode is field 52 of a /proc/<pid>/stat (exit_code).
func exitCode(b []byte) (uint32, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 50 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[49], 10, 32)
	return uint32(v), err == nil
}

// PeekExited finds an exited child of this process without reaping it
// (waitid(P_ALL, WEXITED|WNOHANG|WNOWAIT), retried on EINTR), so that its
// /proc entries can still be read before wait4 reaps it. It returns the
// child's pid, or 0 if there is none to reap now (no children: ECHILD, or
// none has exited).
func PeekExited() int {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0 // ECHILD: no children
		}
		if pid := SiginfoPid(&info); pid > 0 {
			return pid
		}
		return 0 // children exist, none exited
	}
}

// Wait4NoHang is wait4(pid, WNOHANG), retried on EINTR: pid's wait status
// and the reaped pid (0 if pid has not exited).
func Wait4NoHang(pid int) (unix.WaitStatus, int, error) {
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if !errors.Is(err, unix.EINTR) {
			return ws, wpid, err
		}
	}
}
