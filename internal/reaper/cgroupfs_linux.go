//go:build linux

package reaper

// cgroupfs: every read and write of cgroup v2 files in this package: the
// mount, provider cgroup creation (newProviderCgroup, the one place a
// provider cgroup is made), cgroup.events, cgroup.procs, cgroup.kill
// (writeCgroupKill, the one writer), removal, and the event-driven wait for
// "populated 0" (cgWatcher: one inotify instance per process, shared by
// every tree; the kernel allows only ~128 instances per user).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

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

// newProviderCgroup creates the cgroup "<parent>/<name>-<n>" for one
// provider and opens it (O_DIRECTORY, for clone3 CLONE_INTO_CGROUP). It is
// the ONE place a provider cgroup is created: per-provider cgroup settings
// (limits) belong here, before any process is in it. The caller closes fd
// and removes dir (removeCgroupSubtree) on a failed launch. rel is dir as
// /proc/<pid>/cgroup shows it ("/acpx-sidecar-1/provider-3").
func newProviderCgroup(mount, parent, name string) (dir, rel string, fd int, err error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", "", -1, fmt.Errorf("reaper: create cgroup parent: %w", err)
	}
	dir = filepath.Join(parent, fmt.Sprintf("%s-%d", name, cgSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", "", -1, fmt.Errorf("reaper: create cgroup: %w", err)
	}
	fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		return "", "", -1, fmt.Errorf("reaper: open cgroup: %w", err)
	}
	return dir, "/" + mustRel(mount, dir), fd, nil
}

// writeCgroupKill writes "1" to <dir>/cgroup.kill: the kernel SIGKILLs
// every process of the cgroup and of every cgroup below it, forks racing
// the write included (kernel >= 5.14). It is the one cgroup.kill writer of
// this package. A missing directory is not an error (nothing to kill).
func writeCgroupKill(dir string) error {
	err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	if err != nil && errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cgroup.kill: %w", err)
	}
	return nil
}

// cgWatcher is the process's one inotify instance for cgroup.events files:
// a waiter registers a directory and gets a channel that receives a value
// whenever that cgroup's events file changes (populated, frozen). One
// goroutine (run) reads the instance; it ends at close.
type cgWatcher struct {
	f  *os.File // the inotify fd (non-blocking, in the runtime poller)
	fd int

	mu      sync.Mutex
	waiters map[int32]map[*cgWait]struct{} // watch descriptor -> waiters
	done    chan struct{}
}

// cgWait is one registration with a cgWatcher.
type cgWait struct {
	wd int32
	ch chan struct{} // buffered 1: a change since the last receive
}

// newCgWatcher makes the inotify instance and starts its reader.
func newCgWatcher() (*cgWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	w := &cgWatcher{f: os.NewFile(uintptr(fd), "inotify"), fd: fd,
		waiters: map[int32]map[*cgWait]struct{}{}, done: make(chan struct{})}
	go w.run()
	return w, nil
}

func (w *cgWatcher) run() {
	defer close(w.done)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+16))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return // closed
		}
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(uint32(buf[off]) | uint32(buf[off+1])<<8 | uint32(buf[off+2])<<16 | uint32(buf[off+3])<<24)
			nameLen := int(uint32(buf[off+12]) | uint32(buf[off+13])<<8 | uint32(buf[off+14])<<16 | uint32(buf[off+15])<<24)
			for cw := range w.waiters[wd] {
				select {
				case cw.ch <- struct{}{}:
				default:
				}
			}
			off += unix.SizeofInotifyEvent + nameLen
		}
		w.mu.Unlock()
	}
}

// watch registers dir's cgroup.events.
func (w *cgWatcher) watch(dir string) (*cgWait, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wd, err := unix.InotifyAddWatch(w.fd, filepath.Join(dir, "cgroup.events"), unix.IN_MODIFY)
	if err != nil {
		return nil, err
	}
	cw := &cgWait{wd: int32(wd), ch: make(chan struct{}, 1)}
	if w.waiters[cw.wd] == nil {
		w.waiters[cw.wd] = map[*cgWait]struct{}{}
	}
	w.waiters[cw.wd][cw] = struct{}{}
	return cw, nil
}

// unwatch ends a registration; the inotify watch goes with the last one.
func (w *cgWatcher) unwatch(cw *cgWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.waiters[cw.wd]
	delete(set, cw)
	if len(set) == 0 {
		delete(w.waiters, cw.wd)
		// EINVAL once the cgroup was removed (the watch went with it).
		_, _ = unix.InotifyRmWatch(w.fd, uint32(cw.wd))
	}
}

// close stops the reader and closes the instance.
func (w *cgWatcher) close() {
	w.f.Close()
	<-w.done
}

// cgroupSafetyReread bounds how long a waiter trusts inotify alone: the
// kernel rate-limits cgroup.events notifications (one per ~10 ms, the
// later one deferred, not dropped), so this only guards against a lost
// wake-up; it is not a polling period.
const cgroupSafetyReread = 100 * time.Millisecond

// waitCgroupEmpty waits until <dir>/cgroup.events says "populated 0", at
// most d, woken by w (nil: re-read every 5 ms, for processes without a
// watcher: the watchdog, Recover) and once by exited closing (the leader
// was reaped: for a one-process tree populated is 0 by then, and the
// kernel may defer the inotify event by its ~10 ms rate limit when the
// cgroup changed just before). tick runs on every wake-up (used to record
// new members). A closed done stops the wait early. It reports whether
// the cgroup was observed empty.
func waitCgroupEmpty(w *cgWatcher, done, exited <-chan struct{}, dir string, d time.Duration, tick func()) bool {
	deadline := time.Now().Add(d)
	var wake <-chan struct{}
	period := 5 * time.Millisecond
	if w != nil {
		if cw, err := w.watch(dir); err == nil {
			defer w.unwatch(cw)
			wake, period = cw.ch, cgroupSafetyReread
		}
	}
	tm := time.NewTimer(period)
	defer tm.Stop()
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
		tm.Reset(min(rem, period))
		select {
		case <-wake:
		case <-done:
		case <-exited:
			exited = nil // once
		case <-tm.C:
		}
	}
}

func mustRel(base, p string) string {
	r, err := filepath.Rel(base, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}
