//go:build linux

package reaper

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procInfo is what we need of /proc/<pid>/stat.
type procInfo struct {
	ppid, pgid, sid int
	start           uint64 // field 22, clock ticks since boot: the pid's identity
	state           byte   // field 3; 'Z' = zombie (not live)
}

// procKey identifies one process: a pid plus its start time, so a recycled
// pid never matches (docs/rules.md#r22).
type procKey struct {
	pid   int
	start uint64
}

// parseStat parses the contents of /proc/<pid>/stat.
func parseStat(b []byte) (procInfo, bool) {
	// comm (field 2) may contain spaces and ')'; the last ')' ends it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 {
		return procInfo{}, false
	}
	var p procInfo
	var err error
	p.state = f[0][0]
	if p.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procInfo{}, false
	}
	if p.pgid, err = strconv.Atoi(f[2]); err != nil {
		return procInfo{}, false
	}
	if p.sid, err = strconv.Atoi(f[3]); err != nil {
		return procInfo{}, false
	}
	if p.start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return procInfo{}, false
	}
	return p, true
}

// readStat reads /proc/<pid>/stat; false if the process is gone.
func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	return parseStat(b)
}

// snapshot is every process in /proc, read starting at time at.
type snapshot struct {
	at    time.Time
	procs map[int]procInfo
}

// scanProcs snapshots every process in /proc.
func scanProcs() snapshot {
	out := make(map[int]procInfo, 256)
	snap := snapshot{at: time.Now(), procs: out}
	d, err := os.Open("/proc")
	if err != nil {
		return snap
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
		if p, ok := readStat(pid); ok {
			out[pid] = p
		}
	}
	return snap
}

// readCgroupV2 returns the cgroup v2 path ("0::<path>") of pid, also for
// zombies not yet reaped.
func readCgroupV2(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest, true
		}
	}
	return "", false
}

func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func sleepOrDone(done <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}

var (
	taskChildrenOnce sync.Once
	taskChildrenOK   bool
)

// selfChildren lists the direct children of this process (pid self),
// zombies included, from /proc/self/task/*/children: a few small reads,
// fast enough to catch a process that lives for well under a millisecond.
// An orphan re-parented to this process is on the list of one of its
// threads. Without CONFIG_PROC_CHILDREN it falls back to a /proc scan.
// A list read while it changes may miss an entry; callers repeat.
func selfChildren(self int) []int {
	taskChildrenOnce.Do(func() {
		_, err := os.Stat("/proc/self/task/" + strconv.Itoa(self) + "/children")
		taskChildrenOK = err == nil
	})
	if !taskChildrenOK {
		var out []int
		for pid, p := range scanProcs().procs {
			if p.ppid == self {
				out = append(out, pid)
			}
		}
		return out
	}
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var out []int
	for _, tid := range tids {
		b, err := os.ReadFile("/proc/self/task/" + tid.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}
