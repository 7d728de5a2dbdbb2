//go:build linux

package reaper

// The watchdog: in ModeCgroup, ONE helper process per Supervisor (a
// re-execution of the sidecar binary, [GuardianPath, GuardianArg,
// watchdogArg]) covers the sidecar's death for every provider; providers
// have no guardian. It runs outside every provider cgroup, in its own
// process group, and holds the read end of a pipe (its fd 3) from the
// sidecar. The sidecar writes one line per provider cgroup:
//
//	+<absolute cgroup dir>\n   before the provider is started in it
//	-<absolute cgroup dir>\n   after its tree was proven gone and removed
//
// At EOF (the sidecar died, even by SIGKILL, or closed the Supervisor) the
// watchdog writes cgroup.kill to every cgroup still registered, waits (at
// most guardianGiveUp) for each to be "populated 0", removes them deepest
// first, and exits: 0 if all were emptied, 1 otherwise. An idle watchdog
// sleeps in read(2); its cost is one process (~1.5 MB, a few threads) per
// sidecar, not per session. SIGTERM, SIGINT and SIGHUP are ignored: a
// group or service stop must not end the watchdog before the sidecar.
//
// What it does not cover: a process that moved itself out of its cgroup
// (needs root) is not killed when the sidecar dies; it re-parents above
// the sidecar, and the ownership ledger's marker scan is what finds it
// (docs/operations.md, "When the sidecar dies").

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// watchdogArg is os.Args[2] of a watchdog process (os.Args[1] is
// GuardianArg, so MaybeRunGuardian dispatches it).
const watchdogArg = "watchdog"

// watchdogFD is the watchdog's control pipe.
const watchdogFD = 3

// watchdogMain runs this process as a watchdog; see the block comment.
func watchdogMain() int {
	var st unix.Stat_t
	if err := unix.Fstat(watchdogFD, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		fmt.Fprintln(os.Stderr, "acpx-sidecar __guardian watchdog: internal command; must be started by the sidecar")
		return 2
	}
	signal.Ignore(unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	unix.CloseOnExec(watchdogFD)
	rd := bufio.NewReader(os.NewFile(watchdogFD, "watchdog"))
	dirs := map[string]bool{}
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			break
		}
		line = strings.TrimSuffix(line, "\n")
		if len(line) < 2 {
			continue
		}
		switch line[0] {
		case '+':
			dirs[line[1:]] = true
		case '-':
			delete(dirs, line[1:])
		}
	}
	return killCgroups(dirs, guardianGiveUp)
}

// killCgroups writes cgroup.kill to every dir, waits up to d in all for
// each to be empty, and removes the emptied ones; 0 if all were emptied.
func killCgroups(dirs map[string]bool, d time.Duration) int {
	for dir := range dirs {
		_ = cgroup.WriteKill(dir) // nobody to tell: the sidecar is gone

	}
	deadline := time.Now().Add(d)
	code := 0
	for dir := range dirs {
		if !cgroup.WaitEmpty(nil, nil, nil, dir, time.Until(deadline), nil) {
			code = 1
			continue
		}
		for i := 0; cgroup.RemoveSubtree(dir) != nil && i < 50; i++ {
			time.Sleep(2 * time.Millisecond)
		}
	}
	return code
}

// watchdogConn is the sidecar's end of its watchdog.
type watchdogConn struct {
	pid    int
	reaped chan struct{} // closed when the central reaper collected it

	mu sync.Mutex
	fd int // write end of the control pipe, non-blocking; -1 once closed
}

// watchdogPipeSize is asked for the control pipe (F_SETPIPE_SZ; 1 MiB is
// the unprivileged maximum): room for ~15,000 registrations while the
// watchdog is not reading (it is stopped, or starting up).
const watchdogPipeSize = 1 << 20

// startWatchdog starts the watchdog for the cgroup mode Supervisor s. The
// central reaper calls onReaped when the watchdog process was collected.
func startWatchdog(path string, c *central, onReaped func(*watchdogConn, unix.WaitStatus)) (*watchdogConn, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("reaper: watchdog pipe: %w", err)
	}
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, fmt.Errorf("reaper: open /dev/null: %w", err)
	}
	defer unix.Close(null)
	// stdio /dev/null: the sidecar's stdout is the host's JSON-RPC channel,
	// and a watchdog holding the sidecar's stderr would keep a host that
	// reads it to EOF waiting after the sidecar died. fd 3 the control pipe.
	attr := &syscall.ProcAttr{Dir: "/", Env: os.Environ(), Files: []uintptr{uintptr(null), uintptr(null), uintptr(null), uintptr(p[0])},
		Sys: &syscall.SysProcAttr{Setpgid: true}}
	w := &watchdogConn{fd: p[1], reaped: make(chan struct{})}
	c.mu.Lock()
	pid, err := c.fork.forkExec(path, []string{path, GuardianArg, watchdogArg}, attr)
	if err == nil {
		w.pid = pid
		c.helpers[pid] = func(ws unix.WaitStatus) { onReaped(w, ws) }
	}
	c.mu.Unlock()
	unix.Close(p[0])
	if err != nil {
		unix.Close(p[1])
		return nil, fmt.Errorf("reaper: start watchdog %s: %w", path, err)
	}
	_, _ = unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, watchdogPipeSize)
	if err := unix.SetNonblock(p[1], true); err != nil {
		w.close()
		return nil, fmt.Errorf("reaper: watchdog pipe: %w", err)
	}
	return w, nil
}

// errWatchdog is returned by add when the watchdog cannot take the line.
var errWatchdog = errors.New("reaper: the watchdog is not reading its control pipe (stopped or gone); no provider is started without it")

// add registers a provider cgroup before anything runs in it. It fails
// (and the launch must not happen) if the line cannot be written at once.
func (w *watchdogConn) add(dir string) error {
	return w.write("+" + dir + "\n")
}

// remove unregisters a provider cgroup that was proven empty and removed
// (best effort: at EOF the watchdog skips a missing directory).
func (w *watchdogConn) remove(dir string) {
	_ = w.write("-" + dir + "\n")
}

func (w *watchdogConn) write(line string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return errWatchdog
	}
	for {
		n, err := unix.Write(w.fd, []byte(line))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil || n != len(line): // lines are < PIPE_BUF: all or nothing
			return errWatchdog
		}
		return nil
	}
}

// close closes the control pipe: the watchdog kills every cgroup still
// registered, then exits.
func (w *watchdogConn) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// watchdogReaped is the central reaper's callback for s's watchdog: an
// abnormal end is logged, and while s is open a new watchdog takes over
// every live provider cgroup.
func (s *Supervisor) watchdogReaped(w *watchdogConn, ws unix.WaitStatus) {
	close(w.reaped)
	w.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.wd != w {
		return
	}
	s.log.Warn("reaper: the watchdog ended while the sidecar runs; starting a new one",
		zap.Int("watchdog", w.pid), zap.Int("exitCode", ws.ExitStatus()), zap.String("signal", sigName(ws)))
	s.restarts.Add(1)
	go s.restartWatchdog(w)
}

// restartWatchdog replaces the dead watchdog old and registers every
// provider cgroup of a live tree with the new one. Until it succeeds,
// Start refuses (errWatchdog).
func (s *Supervisor) restartWatchdog(old *watchdogConn) {
	defer s.restarts.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.wd != old {
		return
	}
	nw, err := startWatchdog(s.guardianPath, s.c, s.watchdogReaped)
	if err != nil {
		s.log.Error("reaper: cannot restart the watchdog; providers are not covered if the sidecar dies", zap.Error(err))
		return
	}
	s.wd = nw
	for t := range s.trees {
		if t.cg.path != "" && t.g == nil {
			if err := nw.add(t.cg.path); err != nil {
				s.log.Error("reaper: cannot register a provider cgroup with the new watchdog", zap.String("cgroup", t.cg.path), zap.Error(err))
			}
		}
	}
}
