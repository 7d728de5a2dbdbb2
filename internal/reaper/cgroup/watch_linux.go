//go:build linux

package cgroup

// The event-driven wait for a cgroup's "populated 0": Watcher is one
// inotify instance per process, shared by every tree (the kernel allows
// only ~128 instances per user), and WaitEmpty the one wait.

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Watcher is the process's one inotify instance for cgroup.events files:
// a waiter registers a directory and gets a channel that receives a value
// whenever that cgroup's events file changes (populated, frozen). One
// goroutine (run) reads the instance; it ends at Close.
type Watcher struct {
	f  *os.File // the inotify fd (non-blocking, in the runtime poller)
	fd int

	mu      sync.Mutex
	waiters map[int32]map[*cgWait]struct{} // watch descriptor -> waiters
	done    chan struct{}
}

// cgWait is one registration with a Watcher.
type cgWait struct {
	wd int32
	ch chan struct{} // buffered 1: a change since the last receive
}

// NewWatcher makes the inotify instance and starts its reader.
func NewWatcher() (*Watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	w := &Watcher{f: os.NewFile(uintptr(fd), "inotify"), fd: fd,
		waiters: map[int32]map[*cgWait]struct{}{}, done: make(chan struct{})}
	go w.run()
	return w, nil
}

func (w *Watcher) run() {
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
func (w *Watcher) watch(dir string) (*cgWait, error) {
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
func (w *Watcher) unwatch(cw *cgWait) {
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

// Close stops the reader and closes the instance.
func (w *Watcher) Close() {
	w.f.Close()
	<-w.done
}

// cgroupSafetyReread bounds how long a waiter trusts inotify alone: the
// kernel rate-limits cgroup.events notifications (one per ~10 ms, the
// later one deferred, not dropped), so this only guards against a lost
// wake-up; it is not a polling period.
const cgroupSafetyReread = 100 * time.Millisecond

// WaitEmpty waits until <dir>/cgroup.events says "populated 0", at
// most d, woken by w (nil: re-read every 5 ms, for processes without a
// watcher: the watchdog, Recover) and once by exited closing (the leader
// was reaped: for a one-process tree populated is 0 by then, and the
// kernel may defer the inotify event by its ~10 ms rate limit when the
// cgroup changed just before). tick runs on every wake-up (used to record
// new members). A closed done stops the wait early. It reports whether
// the cgroup was observed empty.
func WaitEmpty(w *Watcher, done, exited <-chan struct{}, dir string, d time.Duration, tick func()) bool {
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
		if pop, _ := Populated(dir); !pop {
			return true
		}
		if tick != nil {
			tick()
		}
		rem := time.Until(deadline)
		if rem <= 0 || IsDone(done) {
			pop, _ := Populated(dir)
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

// IsDone reports whether done is closed (nil: never), without blocking.
func IsDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
