//go:build linux

package reaper

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/procfs"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// Left as a copy: procInfo/procKey only mirror procfs.Info/Key's fields (parsing is procfs's, via fromProcfs).

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

// readStat reads /proc/<pid>/stat; false if the process is gone.
func readStat(pid int) (procInfo, bool) {
	p, ok := procfs.ReadStat(pid)
	return fromProcfs(p), ok
}

func fromProcfs(p procfs.Info) procInfo {
	return procInfo{ppid: p.PPid, pgid: p.Pgid, sid: p.Sid, start: p.Start, state: p.State}
}

// snapshot is every process in /proc, read starting at time at.
type snapshot struct {
	at    time.Time
	procs map[int]procInfo
}

// scanProcs snapshots every process in /proc.
func scanProcs() snapshot {
	snap := snapshot{at: time.Now()}
	all := procfs.Scan()
	snap.procs = make(map[int]procInfo, len(all))
	for pid, p := range all {
		snap.procs[pid] = fromProcfs(p)
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

// isDone reports whether done is closed (nil: never): cgroup.IsDone.
func isDone(done <-chan struct{}) bool { return cgroup.IsDone(done) }

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
