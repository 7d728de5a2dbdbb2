//go:build linux

package reaper

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
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

// cgroup2Mount returns the first cgroup2 mount point listed in
// /proc/self/mountinfo that this process may write to.
func cgroup2Mount() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	var found []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 || qf[0] != "cgroup2" {
			continue
		}
		found = append(found, unescapeMount(pf[4]))
	}
	if len(found) == 0 {
		return "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
	}
	for _, m := range found {
		if unix.Access(m, unix.W_OK) == nil {
			return m, nil
		}
	}
	return "", errors.New("cgroup2 mounted at " + found[0] + " but not writable")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space etc).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupPopulated reads "populated" from <dir>/cgroup.events. A missing
// directory counts as not populated (a populated cgroup cannot be removed).
func cgroupPopulated(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return true, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return strings.TrimSpace(v) != "0", nil
		}
	}
	return true, errors.New("cgroup.events has no populated line")
}

// cgroupProcs lists the pids in <dir>/cgroup.procs (live members; zombies
// are not listed).
func cgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// waitCgroupEmpty waits until <dir>/cgroup.events says "populated 0", at
// most d, woken by inotify or a 5 ms re-read. tick runs on every
// wake-up (used to record new members). A done ctx stops the wait early.
// It reports whether the cgroup was observed empty.
func waitCgroupEmpty(done <-chan struct{}, dir string, d time.Duration, tick func()) bool {
	deadline := time.Now().Add(d)
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err == nil {
		if _, werr := unix.InotifyAddWatch(ifd, filepath.Join(dir, "cgroup.events"), unix.IN_MODIFY); werr != nil {
			unix.Close(ifd)
			ifd = -1
		} else {
			defer unix.Close(ifd)
		}
	} else {
		ifd = -1
	}
	buf := make([]byte, 4096)
	for {
		if pop, _ := cgroupPopulated(dir); !pop {
			return true
		}
		if tick != nil {
			tick()
		}
		rem := time.Until(deadline)
		if rem <= 0 || isDone(done) {
			pop, _ := cgroupPopulated(dir)
			return !pop
		}
		// cgroup.events notifications are rate limited (~10 ms) by the
		// kernel, so also re-read on a short period.
		slice := min(rem, 5*time.Millisecond)
		if ifd >= 0 {
			ms := int((slice + time.Millisecond - 1) / time.Millisecond)
			fds := []unix.PollFd{{Fd: int32(ifd), Events: unix.POLLIN}}
			if n, perr := unix.Poll(fds, ms); perr == nil && n > 0 {
				for {
					if _, rerr := unix.Read(ifd, buf); rerr != nil {
						break
					}
				}
			}
		} else {
			sleepOrDone(done, min(slice, 10*time.Millisecond))
		}
	}
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

// cgroupWithin reports whether the cgroup v2 path cg (as in
// /proc/<pid>/cgroup, "0::<path>") is rel or below it.
func cgroupWithin(cg, rel string) bool {
	return cg == rel || strings.HasPrefix(cg, rel+"/")
}

// maxCgroupDepth bounds the walks below a provider cgroup (a provider that
// runs as root may create sub-cgroups; the kernel bounds nothing by default).
const maxCgroupDepth = 256

// cgroupTreeProcs lists the pids in <dir>/cgroup.procs and in the
// cgroup.procs of every cgroup below dir (live members of the whole
// subtree; zombies are not listed).
func cgroupTreeProcs(dir string) []int {
	var out []int
	var walk func(d string, depth int)
	walk = func(d string, depth int) {
		out = append(out, cgroupProcs(d)...)
		if depth >= maxCgroupDepth {
			return
		}
		ents, err := os.ReadDir(d)
		if err != nil {
			return
		}
		for _, e := range ents {
			if e.IsDir() {
				walk(filepath.Join(d, e.Name()), depth+1)
			}
		}
	}
	walk(dir, 0)
	return out
}

// removeCgroupSubtree removes the cgroup directory dir and every cgroup below
// it, deepest first (a provider running as root may have created
// sub-cgroups, and rmdir of a cgroup that has children fails with EBUSY).
// Only rmdir is used, so a cgroup that still has processes is never
// removed. A missing dir is not an error. The first error is returned as
// an *os.PathError naming the directory that could not be removed.
func removeCgroupSubtree(dir string) error {
	return removeCgroupAt(dir, 0)
}

func removeCgroupAt(dir string, depth int) error {
	var first error
	if depth < maxCgroupDepth {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		for _, e := range ents {
			if e.IsDir() { // d_type: cgroupfs has no symlinks to follow
				if err := removeCgroupAt(filepath.Join(dir, e.Name()), depth+1); err != nil && first == nil {
					first = err
				}
			}
		}
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		if first != nil {
			return first
		}
		return &os.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
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
