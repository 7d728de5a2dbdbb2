//go:build linux

package guardian

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/fdexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launchexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/procfs"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// How the guardian forks the provider: plainly, or through the sandbox
// with the PID namespace's init first (docs/protocol.md §19).

// launch forks the provider: own process group, pidfd at fork; with a
// sandbox, by sandbox.Start (with the PID-namespace init first for
// processes "own-tree"), reporting a sandbox step that failed as a
// launchexec.ErrSandbox error, the init ended and reaped.
func (g *guardian) launch() error {
	s := g.spec
	files := []uintptr{0, 1, 2}
	if s.ExecScript && s.ExecFD >= 0 {
		files = append(files, uintptr(s.ExecFD))
	}
	pidfd := -1
	attr := &syscall.ProcAttr{Dir: s.Dir, Env: os.Environ(), Files: files, Sys: &syscall.SysProcAttr{Setpgid: true, PidFD: &pidfd}}
	var pid int
	var err error
	if s.Sandbox == "" {
		pid, err = fdexec.ForkExec(s.Path, s.Argv, attr)
	} else {
		pid, err = g.launchSandboxed(attr)
	}
	if err != nil {
		return err
	}
	p, _ := procfs.ReadStat(pid) // unreaped: readable even if it already exited
	g.leader, g.leaderFD = procfs.Key{Pid: pid, Start: p.Start}, pidfd
	g.emit(Event{Ev: "started", Pid: pid, Start: p.Start, At: time.Now().UnixNano()})
	return nil
}

// launchSandboxed is launch's fork under the spec's plan.
func (g *guardian) launchSandboxed(attr *syscall.ProcAttr) (int, error) {
	s := g.spec
	var plan sandbox.Plan
	if err := json.Unmarshal([]byte(s.Sandbox), &plan); err != nil {
		return 0, fmt.Errorf("%w: bad sandbox plan: %w", launchexec.ErrSandbox, err)
	}
	var conn *sandbox.InitConn
	var null *os.File
	if plan.NewPIDNS {
		var err error
		if conn, err = sandbox.NewInitConn(); err != nil {
			return 0, err
		}
		defer conn.CloseChild()
		if null, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
			conn.Close()
			return 0, err
		}
		defer null.Close()
	}
	st, err := sandbox.Start(&plan, sandbox.Forks{
		Init: func() (int, error) {
			iattr := &syscall.ProcAttr{Dir: "/", Env: os.Environ(), Files: []uintptr{null.Fd(), null.Fd(), null.Fd(), conn.ChildFD()},
				Sys: &syscall.SysProcAttr{Setpgid: true}}
			path, argv, _ := sandbox.InitCommand(s.Launch)
			return fdexec.ForkExec(path, argv, iattr)
		},
		Agent: func(int) (int, error) { return fdexec.ForkExec(s.Path, s.Argv, attr) },
	})
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		if st.InitPid > 0 {
			_ = unix.Kill(st.InitPid, unix.SIGKILL) // still unreaped: the pid is ours
			var ws unix.WaitStatus
			for {
				if _, werr := unix.Wait4(st.InitPid, &ws, 0, nil); !errors.Is(werr, unix.EINTR) {
					break
				}
			}
		}
		if errors.Is(err, sandbox.ErrStep) && !errors.Is(err, launchexec.ErrSandbox) {
			err = fmt.Errorf("%w: %w", launchexec.ErrSandbox, err)
		}
		return 0, err
	}
	if conn != nil {
		g.initCtl = conn
		go conn.Serve(func() { g.lookInit(st.InitPid) }, g.leaderGone)
	}
	return st.AgentPid, nil
}

// lookInit reports each child of the tree's init that exited, with the
// wait status /proc shows while it is still a zombie (the init reaps it
// once this returns): the proof names what the init reaps as it names
// what the guardian reaps. Runs on the init socket's goroutine; emit
// writes each event in one write.
func (g *guardian) lookInit(init int) {
	now := time.Now().UnixNano()
	for _, c := range procfs.Children(init) {
		if !c.Exited {
			continue
		}
		ev := Event{Ev: "exit", Pid: c.Pid, Start: c.Start, Role: roleDescendant, At: now}
		if c.Status.Signaled() {
			ev.Sig = unix.SignalName(c.Status.Signal())
		} else {
			code := c.Status.ExitStatus()
			ev.Code = &code
		}
		g.emit(ev)
	}
}
