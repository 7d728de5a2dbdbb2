//go:build darwin

package tablemode

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
)

// tableReason is Detect's reason on Darwin.
const tableReason = "process group + sysctl process-table scans (KERN_PROC_ALL parent chains, the session's environment marker " +
	"read back with KERN_PROCARGS2), kqueue EVFILT_PROC for the provider's exit; no limits, no sandbox, no watchdog " +
	"(a process that leaves the group, clears the marker and is orphaned between two scans is not seen)"

// reapingOwnedElsewhere: there is no other reaper on Darwin.
func reapingOwnedElsewhere() error { return nil }

// fdPath names an open file descriptor of the process that execve's it
// (fdesc, /dev/fd).
func fdPath(fd int) string { return "/dev/fd/" + strconv.Itoa(fd) }

// signalTablePinned re-reads the process table for k.pid and sends sig
// only if the process still has k's start time and is not a zombie.
// Darwin has no pidfd: a pid could be recycled between the check and
// kill(2), which needs the process to exit, be reaped and its pid be
// handed out again in that instant (Darwin allocates pids upwards to
// 99999 before wrapping). A process already gone is not an error; it
// reports whether sig was sent.
func signalTablePinned(procs proctable.Reader, k tableKey, sig unix.Signal) (bool, error) {
	p, err := procs.Stat(k.pid)
	if err != nil || p.Start != k.start || p.Zombie {
		return false, nil
	}
	if err := unix.Kill(k.pid, sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("pid %d: %v", k.pid, err)
	}
	return true, nil
}

// tableWaiter reaps this process's children: one kqueue holds an
// EVFILT_PROC NOTE_EXIT filter per provider (watch), so a provider's exit
// wakes it at once; every tableScanInterval it reaps anyway. Darwin has no
// child subreaper, so the only children are the providers themselves
// (this process starts no other): wait4(-1) collects just those.
type tableWaiter struct {
	c      *tableCore
	kq     int
	reapMu sync.Mutex // held while reaping and while a group is signalled
	stop   chan struct{}
	done   chan struct{}
}

func newTableWaiter(c *tableCore) (*tableWaiter, error) {
	kq, err := unix.Kqueue()
	if err != nil {
		return nil, fmt.Errorf("kqueue: %w", err)
	}
	unix.CloseOnExec(kq)
	w := &tableWaiter{c: c, kq: kq, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w, nil
}

// watch adds the provider pid's NOTE_EXIT filter (reapMu held by the
// caller). ESRCH means it already exited: the next pass reaps it.
func (w *tableWaiter) watch(pid int) {
	var ev unix.Kevent_t
	unix.SetKevent(&ev, pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ev.Fflags = unix.NOTE_EXIT
	if _, err := unix.Kevent(w.kq, []unix.Kevent_t{ev}, nil, nil); err != nil {
		w.c.log.Debug("reaper: kqueue EVFILT_PROC not added", zap.Int("pid", pid), zap.Error(err))
	}
}

func (w *tableWaiter) run() {
	defer close(w.done)
	events := make([]unix.Kevent_t, 64)
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		ts := unix.NsecToTimespec(int64(tableScanInterval))
		if _, err := unix.Kevent(w.kq, nil, events, &ts); err != nil && !errors.Is(err, unix.EINTR) {
			w.c.log.Warn("reaper: kevent failed", zap.Error(err))
			time.Sleep(tableScanInterval)
		}
		w.reapNow()
	}
}

// reapNow reaps every exited child now (a reap pass).
func (w *tableWaiter) reapNow() {
	w.reapMu.Lock()
	defer w.reapMu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD, or none exited
		}
		w.c.exited(pid, 0, 0, ws)
	}
}

// close stops the waiter after a final reap pass.
func (w *tableWaiter) close() {
	close(w.stop)
	<-w.done
	unix.Close(w.kq)
	w.reapNow()
}
