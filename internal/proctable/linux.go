//go:build linux

package proctable

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// New returns the /proc reader. Errors: /proc is not mounted or not
// readable (ErrUnsupported, wrapped).
func New() (Reader, error) {
	if _, err := os.ReadFile("/proc/self/stat"); err != nil {
		return nil, fmt.Errorf("%w: /proc/self/stat: %v", ErrUnsupported, err)
	}
	return procfs{}, nil
}

// procfs reads /proc.
type procfs struct{}

// List reads /proc/<pid>/stat of every numeric entry of /proc.
func (procfs) List() ([]Proc, error) {
	f, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("proctable: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("proctable: read /proc: %w", err)
	}
	out := make([]Proc, 0, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		if p, err := statPid(pid); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// Stat reads /proc/<pid>/stat.
func (procfs) Stat(pid int) (Proc, error) { return statPid(pid) }

// Environ reads /proc/<pid>/environ (NUL-separated entries).
func (procfs) Environ(pid int) ([]string, error) {
	if pid <= 0 {
		return nil, ErrNotFound
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errESRCH) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("proctable: environ of %d: %w", pid, err)
	}
	return splitNUL(b), nil
}

func statPid(pid int) (Proc, error) {
	if pid <= 0 {
		return Proc{}, ErrNotFound
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errESRCH) {
			return Proc{}, ErrNotFound
		}
		return Proc{}, fmt.Errorf("proctable: stat of %d: %w", pid, err)
	}
	p, ok := parseStat(b)
	if !ok {
		return Proc{}, fmt.Errorf("proctable: /proc/%d/stat: unparseable", pid)
	}
	p.Pid = pid
	return p, nil
}

// parseStat parses /proc/<pid>/stat: comm (field 2) may hold spaces and
// ')', so fields are counted from the last ')'; then state (3), ppid (4),
// pgrp (5), num_threads (20) and starttime (22). The state is the thread
// group leader's: a leader thread that has exited shows 'Z' while other
// threads of the process still run (pthread_exit of the main thread) or
// are still tearing the process down (a SIGKILLed process freeing a large
// heap: observed 'Z' with 2 threads for a moment), so the process is a
// zombie only when it shows 'Z' (or 'X') with at most one thread left.
func parseStat(b []byte) (Proc, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Proc{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 || f[0] == "" {
		return Proc{}, false
	}
	var p Proc
	var err error
	threads, err := strconv.Atoi(f[17])
	if err != nil {
		return Proc{}, false
	}
	p.Zombie = (f[0][0] == 'Z' || f[0][0] == 'X') && threads <= 1
	if p.PPid, err = strconv.Atoi(f[1]); err != nil {
		return Proc{}, false
	}
	if p.Pgid, err = strconv.Atoi(f[2]); err != nil {
		return Proc{}, false
	}
	if p.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Proc{}, false
	}
	return p, true
}

// errESRCH: a read of /proc/<pid>/… while pid exits.
var errESRCH = syscall.ESRCH
