//go:build linux

package reaper

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/fdexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launchexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// Start launches spec as a new provider tree. Stdin/Stdout/Stderr of the
// returned Tree are pipes owned by the caller, connected directly to the
// provider.
//
// ModeCgroup: the sidecar forks the provider itself (no guardian) in its
// own process group, straight into its own new cgroup (clone3
// CLONE_INTO_CGROUP, so there is no window outside it), after registering
// that cgroup with the Supervisor's watchdog (watchdog_linux.go); the
// provider's orphaned descendants re-parent to the sidecar (a child
// subreaper). ModeSubreaper and ModeProcessGroup: the provider runs behind
// its own guardian (startGuardian).
//
// Errors: ErrSealed, ErrClosed, invalid spec, cgroup, watchdog, guardian or
// fork/exec errors (which name Path, never Env).
func (s *Supervisor) Start(spec Spec) (*Tree, error) {
	if !filepath.IsAbs(spec.Path) {
		return nil, fmt.Errorf("reaper: Path %q is not absolute", spec.Path)
	}
	name := spec.Name
	if name == "" {
		name = "provider"
	}
	if !validName(name) {
		return nil, fmt.Errorf("reaper: Name %q must match [A-Za-z0-9._-]{1,64}", spec.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return nil, ErrSealed
	}
	if s.closed {
		return nil, ErrClosed
	}
	if !spec.Sandbox.Empty() && !SandboxSupported(s.mode) {
		return nil, ErrSandboxUnsupported
	}
	var t *Tree
	var err error
	if s.mode == ModeCgroup {
		t, err = s.startDirect(spec, name)
	} else {
		t, err = s.startGuardian(spec)
	}
	if err != nil {
		return nil, err
	}
	s.trees[t] = struct{}{}
	return t, nil
}

func newTree(s *Supervisor) *Tree {
	return &Tree{s: s, c: s.c, mode: s.mode, pidfd: -1, exited: make(chan struct{}),
		members: map[procKey]*member{}}
}

// startDirect is Start in ModeCgroup (s.mu held).
func (s *Supervisor) startDirect(spec Spec, name string) (*Tree, error) {
	t := newTree(s)
	dir, rel, cgfd, err := cgroup.NewProvider(s.cgMount, s.cgParent, name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(cgfd)
	t.cg.path, t.cg.rel = dir, rel
	if err := s.wd.add(dir); err != nil {
		_ = cgroup.RemoveSubtree(dir)
		return nil, err
	}
	var v1 map[string]string
	fail := func(err error) (*Tree, error) {
		_ = cgroup.RemoveSubtree(dir)
		_ = cgroup.RemoveV1Dirs(v1)
		s.wd.remove(dir)
		return nil, err
	}
	// Limits are in force before anything runs in the cgroup
	// (docs/protocol.md §18.2, Limits): v2 limits in the provider cgroup,
	// and on a hybrid host v1 limit cgroups the provider joins through the
	// launch entry before its own code runs (launch_linux.go), which also
	// applies the sandbox.
	plan, err := cgroup.ApplyLimits(dir, spec.Limits)
	if err != nil {
		return fail(err)
	}
	if v1, err = s.makeV1Limits(plan, dir, spec.Limits); err != nil {
		return fail(err)
	}
	t.cg.v1 = v1
	childEnds, parentEnds, err := StdioPipes()
	if err != nil {
		return fail(err)
	}
	files := []uintptr{childEnds[0].Fd(), childEnds[1].Fd(), childEnds[2].Fd()}
	path := spec.Path
	execFD, keepExecFD := -1, false
	if spec.ExecFile != nil {
		fd := int(spec.ExecFile.Fd())
		if isScript(fd) {
			// The interpreter must be able to open the script by this name.
			files = append(files, uintptr(fd))
			path, execFD, keepExecFD = "/proc/self/fd/3", 3, true
		} else {
			// Close-on-exec in the provider: resolved by execve, then closed.
			path = "/proc/self/fd/" + strconv.Itoa(fd)
		}
	}
	argv := append([]string{spec.Path}, spec.Args...)
	sandboxed := !spec.Sandbox.Empty()
	var status *os.File // read end of the launch entry's status pipe
	landlockAt := -1    // the entry's fd of the Landlock ruleset sandbox.Start hands it
	if len(v1) > 0 {
		// cgroup v1 limits are joined by the launch entry (launch_linux.go).
		var statusW *os.File
		if status, statusW, err = os.Pipe(); err != nil {
			closeFiles(childEnds)
			closeFiles(parentEnds)
			return fail(fmt.Errorf("reaper: pipe: %w", err))
		}
		defer status.Close()
		if spec.ExecFile != nil && !keepExecFD {
			files = append(files, spec.ExecFile.Fd())
			path, execFD = "/proc/self/fd/3", 3
		}
		files = append(files, statusW.Fd())
		childEnds = append(childEnds, statusW)
		statusFD := len(files) - 1
		cloexec := execFD
		if keepExecFD {
			cloexec = -1
		}
		if spec.Sandbox.Landlocks() {
			landlockAt = len(files)
			files = append(files, 0) // set to the ruleset at the fork
		}
		argv = launchexec.Argv(s.guardianPath, statusFD, cloexec, landlockAt, v1Procs(v1), path, argv)
		path = s.guardianPath
	}
	var il *initLaunch
	if spec.Sandbox != nil && spec.Sandbox.NewPIDNS {
		if il, err = newInitLaunch(); err != nil {
			closeFiles(childEnds)
			closeFiles(parentEnds)
			return fail(err)
		}
	}
	pidfd, initPidfd := -1, -1
	attr := &syscall.ProcAttr{Dir: spec.Dir, Env: spec.Env, Files: files,
		Sys: &syscall.SysProcAttr{Setpgid: true, PidFD: &pidfd, UseCgroupFD: true, CgroupFD: cgfd}}

	// The registry lock is held across fork so the reaper cannot see the
	// provider exit before it is registered.
	s.c.mu.Lock()
	var pid int
	var st sandbox.Started
	if sandboxed {
		st, err = sandbox.Start(spec.Sandbox, sandbox.Forks{
			Init: func() (int, error) {
				return il.forkInit(s.guardianPath, spec.Env,
					&syscall.SysProcAttr{Setpgid: true, PidFD: &initPidfd, UseCgroupFD: true, CgroupFD: cgfd})
			},
			Agent: func(ruleset int) (int, error) {
				if landlockAt >= 0 {
					attr.Files[landlockAt] = uintptr(ruleset)
				}
				return fdexec.ForkExec(path, argv, attr)
			},
			EntryLandlock: landlockAt >= 0,
		})
		pid = st.AgentPid
		if err != nil {
			err = sandboxError(spec.Path, err)
		}
	} else {
		pid, err = s.c.fork.forkExec(path, argv, attr)
		if err != nil {
			err = fmt.Errorf("start %s: %w", spec.Path, err)
		}
	}
	if initPidfd >= 0 {
		unix.Close(initPidfd) // the init is reaped here, signalled through the cgroup
	}
	il.closeChild()
	if err != nil {
		s.c.mu.Unlock()
		closeFiles(childEnds)
		closeFiles(parentEnds)
		il.closeAll()
		if st.InitPid > 0 {
			// The init alone is in the cgroup: ended with it (the central
			// reaper reaps it as a child of no tree).
			_ = cgroup.WriteKill(dir)
			cgroup.WaitEmpty(s.c.watch, nil, nil, dir, time.Second, nil)
		}
		return fail(fmt.Errorf("reaper: %w", err))
	}
	p, _ := readStat(pid) // unreaped: readable even if it already exited
	now := time.Now()
	t.mu.Lock()
	t.id.pid, t.id.pgid, t.id.start, t.id.startedAt, t.pidfd = pid, pid, p.start, now, pidfd
	t.addMemberLocked(procKey{pid: pid, start: p.start}, RoleProvider, now)
	if st.InitPid > 0 {
		ip, _ := readStat(st.InitPid)
		t.addMemberLocked(procKey{pid: st.InitPid, start: ip.start}, RoleDescendant, now)
		t.initCtl = il.conn
		go t.serveInit(il.conn, st.InitPid)
	}
	t.mu.Unlock()
	s.c.register(t)
	s.c.mu.Unlock()
	if spec.ExecFile != nil {
		runtime.KeepAlive(spec.ExecFile)
	}
	closeFiles(childEnds)
	t.stdio.Stdin, t.stdio.Stdout, t.stdio.Stderr = parentEnds[0], parentEnds[1], parentEnds[2]
	if status != nil {
		if err := s.awaitLaunch(t, status, spec.Path); err != nil {
			closeFiles(parentEnds)
			return fail(err)
		}
	}
	s.log.Debug("reaper: provider started", zap.Int("pid", pid), zap.Int("init", st.InitPid), zap.String("path", spec.Path),
		zap.String("containment", string(s.mode)), zap.String("cgroup", dir))
	return t, nil
}

// isScript reports whether the open file starts with "#!". Unreadable
// files are treated as scripts (the choice that works for both kinds).
func isScript(fd int) bool {
	rfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer unix.Close(rfd)
	var b [2]byte
	n, err := unix.Pread(rfd, b[:], 0)
	if err != nil {
		return true
	}
	return n == 2 && b[0] == '#' && b[1] == '!'
}

// ioCloser types for Tree accessors.
var (
	_ io.WriteCloser = (*os.File)(nil)
	_ io.ReadCloser  = (*os.File)(nil)
)
