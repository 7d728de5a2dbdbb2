//go:build linux

package reaper

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/acpx-sidecar/acpx-sidecar/internal/launchexec"
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
// inside the namespace are reaped by the init (their proof entries say
// reapedBy "parent"). The init's control pipe is closed when the agent
// is reaped (Tree.recordExit), and the init then leaves as soon as the
// namespace holds nothing else, emptying the cgroup; cgroup.kill or a
// pinned SIGKILL ends it, and the kernel the whole namespace with it.

// initLaunch is what forking a tree's init needs: its control pipe and
// /dev/null for its stdio.
type initLaunch struct {
	ctlR, ctlW *os.File
	null       *os.File
}

// newInitLaunch makes the init's control pipe and opens /dev/null.
func newInitLaunch() (*initLaunch, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("reaper: pipe: %w", err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, fmt.Errorf("reaper: %w", err)
	}
	return &initLaunch{ctlR: ctlR, ctlW: ctlW, null: null}, nil
}

// closeChild closes what only the init needed (after the fork).
func (l *initLaunch) closeChild() {
	if l != nil {
		l.ctlR.Close()
		l.null.Close()
	}
}

// closeAll closes everything (a failed launch: the init sees EOF).
func (l *initLaunch) closeAll() {
	if l != nil {
		l.closeChild()
		l.ctlW.Close()
	}
}

// forkInit forks the tree's init with sys (the agent's cgroup and
// process-group attributes) and env (the agent's, so recovery and the
// test harness find it by the session's marker): the memfd program, or
// fallback (the sidecar's own image) once executing the memfd failed.
func (l *initLaunch) forkInit(fallback string, env []string, sys func() *syscall.SysProcAttr) (int, error) {
	attr := &syscall.ProcAttr{Dir: "/", Env: env, Files: []uintptr{l.null.Fd(), l.null.Fd(), l.null.Fd(), l.ctlR.Fd()}}
	path, argv, isFallback := sandbox.InitCommand(fallback)
	attr.Sys = sys()
	pid, err := syscall.ForkExec(path, argv, attr)
	if err != nil && !isFallback && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.ENOMEM) {
		sandbox.InitExecFailed()
		path, argv, _ = sandbox.InitCommand(fallback)
		attr.Sys = sys()
		pid, err = syscall.ForkExec(path, argv, attr)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: the PID namespace's init: %w", launchexec.ErrSandbox, err)
	}
	return pid, nil
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
