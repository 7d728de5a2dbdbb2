//go:build linux

package reaper

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/fdexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launchexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/procfs"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// A sandboxed provider is forked by sandbox.Start from a thread of its
// own that applies the plan to itself first (namespaces, mounts,
// capabilities, seccomp, Landlock are per thread and inherited by its
// children), so the agent's first instruction runs inside the whole
// sandbox; the thread then ends, and its children become the main
// thread's, which central.children reads. With processes "own-tree" that
// thread first forks the tree's PID-namespace init (sandbox.InitCommand):
// a child of this process like the agent, in the tree's cgroup, listed
// in the proof as a descendant. The agent stays this process's own
// child, so its wait status, its pid (the host's) and the proof's
// provider entry are exactly as without a namespace; processes orphaned
// inside the namespace are the init's to reap, and the proof names them
// exactly as if the sidecar had reaped them: the init announces each
// one on its control socket and waits while the sidecar reads its exit
// status from /proc (serveInit). The init is told when the agent is
// reaped, and then leaves as soon as the namespace holds nothing else,
// emptying the cgroup; cgroup.kill or a pinned SIGKILL ends it, and the
// kernel the whole namespace with it.

// initLaunch is what forking a tree's init needs: its control socket and
// /dev/null for its stdio.
type initLaunch struct {
	conn *sandbox.InitConn
	null *os.File
}

// newInitLaunch makes the init's control socket and opens /dev/null.
func newInitLaunch() (*initLaunch, error) {
	conn, err := sandbox.NewInitConn()
	if err != nil {
		return nil, fmt.Errorf("reaper: %w", err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("reaper: %w", err)
	}
	return &initLaunch{conn: conn, null: null}, nil
}

// closeChild closes what only the init needed (after the fork).
func (l *initLaunch) closeChild() {
	if l != nil {
		l.conn.CloseChild()
		l.null.Close()
	}
}

// closeAll closes everything (a failed launch: the init sees EOF).
func (l *initLaunch) closeAll() {
	if l != nil {
		l.closeChild()
		l.conn.Close()
	}
}

// forkInit forks the tree's init with sys (the agent's cgroup and
// process-group attributes) and env (the agent's, so recovery and the
// test harness find it by the session's marker): the memfd program, or
// fallback (the sidecar's own image) where there is none. Its error is
// the fork/exec error as is (E2BIG for an environment over the kernel's
// limit, as the agent's would be).
func (l *initLaunch) forkInit(fallback string, env []string, sys *syscall.SysProcAttr) (int, error) {
	path, argv, _ := sandbox.InitCommand(fallback)
	return fdexec.ForkExec(path, argv, &syscall.ProcAttr{Dir: "/", Env: env,
		Files: []uintptr{l.null.Fd(), l.null.Fd(), l.null.Fd(), l.conn.ChildFD()}, Sys: sys})
}

// serveInit answers the tree's init (sandbox.InitConn.Serve) until its
// socket closes: every child the init announces is looked at while it is
// still a zombie (lookInit), and the init is told when the leader is
// reaped (t.exited).
func (t *Tree) serveInit(conn *sandbox.InitConn, init int) {
	conn.Serve(func() { t.lookInit(init) }, t.exited)
}

// lookInit records the children of the tree's init (host pids, from
// /proc): an exited one with the wait status /proc shows for it, the
// init about to reap it, a live one as a member. So the proof names
// every process orphaned inside the namespace as it named those the
// sidecar reaped itself.
func (t *Tree) lookInit(init int) {
	now := time.Now()
	for _, c := range procfs.Children(init) {
		k := procKey{pid: c.Pid, start: c.Start}
		if c.Exited {
			t.recordExit(k, c.Status, now)
		} else {
			t.addMember(k, now)
		}
	}
}

// sandboxError is Start's error for a provider (name): a step of the
// sandbox wraps launchexec.ErrSandbox (nothing of the agent ran); a fork
// error is the fork/exec error as without a sandbox.
func sandboxError(name string, err error) error {
	if errors.Is(err, sandbox.ErrStep) && !errors.Is(err, launchexec.ErrSandbox) {
		return fmt.Errorf("start %s: %w: %w", name, launchexec.ErrSandbox, err)
	}
	return fmt.Errorf("start %s: %w", name, err)
}
