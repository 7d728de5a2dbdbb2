//go:build linux

package tablemode

import (
	"errors"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/procfs"
	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
)

// tableReason is Detect's reason on Linux.
const tableReason = "process group + /proc scans (parent chains, the session's environment marker), pidfd-pinned signals; " +
	"the macOS algorithm, selected only by --containment=process-table (weaker than cgroup and subreaper: no limits, no sandbox, " +
	"no watchdog; a process that leaves the group, clears the marker and is orphaned between two scans is not seen)"

// reapingOwnedElsewhere refuses a process-table core while a
// reaper.Supervisor's central reaper runs: both wait for every child.
func reapingOwnedElsewhere() error {
	if reaper.ReapsChildren() {
		return errors.New("a Supervisor already reaps this process's children")
	}
	return nil
}

// fdPath names an open file descriptor of the process that execve's it.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// signalTablePinned sends sig to k through procfs.SignalPinned, the one
// "pin (pidfd), re-check, signal" step (docs/rules.md#r22): on Linux a
// proctable start time is /proc/<pid>/stat field 22, the same as
// procfs.Key's.
// A process showing 'Z' is signalled too: it may be a leader thread that
// exited while other threads run (proctable.Proc.Zombie); a real zombie
// ignores the signal. A process already gone is not an error; it reports
// whether sig was sent.
func signalTablePinned(_ proctable.Reader, k tableKey, sig unix.Signal) (bool, error) {
	return procfs.SignalPinned(procfs.Key{Pid: k.pid, Start: k.start}, sig, nil)
}

// tableWaiter reaps every child of this process on SIGCHLD (and every
// tableScanInterval, for coalesced signals). Each exited child is first
// peeked (waitid WNOWAIT), so its start time and group can still be read
// to attribute it, then reaped with wait4(pid).
type tableWaiter struct {
	c      *tableCore
	reapMu sync.Mutex // held while reaping and while a group is signalled
	sigch  chan os.Signal
	stop   chan struct{}
	done   chan struct{}
}

func newTableWaiter(c *tableCore) (*tableWaiter, error) {
	w := &tableWaiter{c: c, sigch: make(chan os.Signal, 1), stop: make(chan struct{}), done: make(chan struct{})}
	signal.Notify(w.sigch, syscall.SIGCHLD)
	go w.run()
	return w, nil
}

func (w *tableWaiter) run() {
	defer close(w.done)
	tick := time.NewTicker(tableScanInterval)
	defer tick.Stop()
	for {
		w.reapNow()
		select {
		case <-w.stop:
			return
		case <-w.sigch:
		case <-tick.C:
		}
	}
}

// watch is a no-op on Linux: SIGCHLD covers every child.
func (w *tableWaiter) watch(int) {}

// reapNow reaps every exited child now (a reap pass).
func (w *tableWaiter) reapNow() {
	// Left alike to reaper's reapPass: the peek is shared (procfs.PeekExited); attributing and reaping differ by mode.
	w.reapMu.Lock()
	defer w.reapMu.Unlock()
	for {
		pid := procfs.PeekExited()
		if pid <= 0 {
			return // no children, or none exited
		}
		p, _ := w.c.procs.Stat(pid) // a zombie: still in the table
		ws, wpid, err := procfs.Wait4NoHang(pid)
		if err != nil || wpid != pid {
			w.c.log.Warn("reaper: wait4 after waitid peek failed", zap.Int("pid", pid), zap.Error(err))
			return
		}
		w.c.exited(pid, p.Start, p.Pgid, ws)
	}
}

// close stops the waiter after a final reap pass.
func (w *tableWaiter) close() {
	close(w.stop)
	<-w.done
	signal.Stop(w.sigch)
	w.reapNow()
}
