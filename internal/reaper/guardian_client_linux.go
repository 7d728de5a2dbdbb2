//go:build linux

package reaper

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/guardian"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launchexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// guardianStartTimeout bounds the guardian handshake in Start.
const guardianStartTimeout = 10 * time.Second

// guardianConn is the sidecar's end of one guardian.
type guardianConn struct {
	pid int

	ctlMu sync.Mutex
	ctl   *os.File // nil once closed

	started chan guardian.Event // "started" or "fail", at most one
	empty   chan struct{}       // guardian reported: no descendant left
	done    chan struct{}       // status pipe EOF (guardian exited)
	reaped  chan struct{}       // the central reaper collected the guardian

	emptyOnce, reapedOnce sync.Once
}

func newGuardianConn(ctl *os.File) *guardianConn {
	return &guardianConn{ctl: ctl, started: make(chan guardian.Event, 1),
		empty: make(chan struct{}), done: make(chan struct{}), reaped: make(chan struct{})}
}

// send writes one control line; false if the guardian is gone.
func (g *guardianConn) send(v any) bool {
	b, _ := json.Marshal(v)
	g.ctlMu.Lock()
	defer g.ctlMu.Unlock()
	if g.ctl == nil {
		return false
	}
	_, err := g.ctl.Write(append(b, '\n'))
	return err == nil
}

// closeCtl closes the control pipe: the guardian treats it as the sidecar's
// death and kills the tree.
func (g *guardianConn) closeCtl() {
	g.ctlMu.Lock()
	defer g.ctlMu.Unlock()
	if g.ctl != nil {
		g.ctl.Close()
		g.ctl = nil
	}
}

// alive: the guardian has not exited yet (its status pipe is open).
func (g *guardianConn) alive() bool { return !isDone(g.done) }

// gone reports whether the guardian process has exited: status pipe at
// EOF, reaped, or a zombie. Its pid is pinned until we reap it (we are its
// only reaper), so reading its stat is safe.
func (g *guardianConn) gone() bool {
	if !g.alive() || isDone(g.reaped) {
		return true
	}
	p, ok := readStat(g.pid)
	return !ok || p.state == 'Z'
}

// guardianDiedEarly reports whether t's guardian exited (e.g. was
// SIGKILLed) without having reported its tree empty: whatever was left of
// the tree re-parented to this process (also a child subreaper), and the
// sidecar must find, end and verify it itself (Terminate's fallback).
func (t *Tree) guardianDiedEarly() bool {
	g := t.g
	return g != nil && !isDone(g.empty) && g.gone()
}

// hasLiveDescendant reports whether /proc shows a live (non-zombie)
// process with the guardian as ancestor.
func (g *guardianConn) hasLiveDescendant() bool {
	snap := scanProcs()
	children := map[int][]int{}
	for pid, p := range snap.procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	queue := append([]int(nil), children[g.pid]...)
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if snap.procs[pid].state != 'Z' {
			return true
		}
		queue = append(queue, children[pid]...)
	}
	return false
}

func (g *guardianConn) markReaped() { g.reapedOnce.Do(func() { close(g.reaped) }) }

// readStatus consumes the guardian's status lines until EOF.
func (t *Tree) readStatus(g *guardianConn, st *os.File) {
	defer close(g.done)
	defer st.Close()
	sc := bufio.NewScanner(st)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		var ev guardian.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.s.log.Warn("reaper: bad guardian status line", zap.Int("guardian", g.pid), zap.Error(err))
			continue
		}
		switch ev.Ev {
		case "started", "fail":
			select {
			case g.started <- ev:
			default:
			}
		case "exit":
			t.recordExitInfo(procKey{pid: ev.Pid, start: ev.Start}, ev.Role, ev.Code, ev.Sig, time.Unix(0, ev.At))
		case "seen":
			// A process the guardian signalled; if its own parent reaps
			// it, finalize records it as observed gone.
			t.addMember(procKey{pid: ev.Pid, start: ev.Start}, time.Now())
		case "signal":
			if ev.Msg != "" {
				t.mu.Lock()
				t.proof.errors = append(t.proof.errors, ErrorRecord{Code: CodeSignalFailed, Message: ev.Sig + ": " + ev.Msg})
				t.mu.Unlock()
			}
		case "empty":
			g.emptyOnce.Do(func() { close(g.empty) })
		}
	}
}

// recordExitInfo stores a wait status reported by the guardian.
func (t *Tree) recordExitInfo(k procKey, role string, code *int, sig string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if role != RoleProvider {
		role = RoleDescendant
	}
	m := t.addMemberLocked(k, role, at)
	m.reaped, m.gone, m.at, m.code, m.sig = true, true, at, code, sig
	if m.role == RoleProvider && !t.leaderReaped {
		t.leaderReaped = true
		t.status = ExitStatus{Code: code, Signal: sig, At: at}
		close(t.exited)
	}
}

// guardianReapedStatus is called by the central reaper when it collected
// the guardian process itself (not part of the proof).
func (t *Tree) guardianReapedStatus(ws unix.WaitStatus) {
	if t.g == nil {
		return
	}
	if ws.Signaled() || ws.ExitStatus() != 0 {
		t.s.log.Warn("reaper: guardian ended abnormally", zap.Int("guardian", t.g.pid),
			zap.Int("exitCode", ws.ExitStatus()), zap.String("signal", sigName(ws)))
	}
	t.g.markReaped()
}

func sigName(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return unix.SignalName(ws.Signal())
	}
	return ""
}

// waitAny waits up to d for any of chs (nil entries ignored); true if one
// closed.
func waitAny(d time.Duration, chs ...<-chan struct{}) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	cases := make([]<-chan struct{}, 0, len(chs))
	for _, c := range chs {
		if c != nil {
			cases = append(cases, c)
		}
	}
	// At most four channels are ever passed.
	for len(cases) < 4 {
		cases = append(cases, nil)
	}
	select {
	case <-cases[0]:
	case <-cases[1]:
	case <-cases[2]:
	case <-cases[3]:
	case <-tm.C:
		return false
	}
	return true
}

// startGuardian launches spec behind its own guardian (subreaper and
// process-group modes; see internal/guardian): the sidecar starts the
// guardian (Options.GuardianPath with argv[1] GuardianArg, in its own
// process group, environment Spec.Env), which forks the provider in its
// own process group. The guardian holds no copy of the provider's stdio.
// It returns once the guardian reported the provider's pid, at most
// guardianStartTimeout. s.mu is held.
func (s *Supervisor) startGuardian(spec Spec) (*Tree, error) {
	t := newTree(s)

	fail := func(err error) (*Tree, error) { return nil, err }
	if _, err := cgroup.ApplyLimits("", spec.Limits); err != nil {
		return fail(err) // no cgroup: limits cannot be enforced
	}

	inR, inW, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("reaper: pipe: %w", err))
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return fail(fmt.Errorf("reaper: pipe: %w", err))
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return fail(fmt.Errorf("reaper: pipe: %w", err))
	}
	childEnds := []*os.File{inR, outW, errW}
	parentEnds := []*os.File{inW, outR, errR}
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}

	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		closeAll(childEnds)
		closeAll(parentEnds)
		return fail(fmt.Errorf("reaper: pipe: %w", err))
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		closeAll(childEnds)
		closeAll(parentEnds)
		ctlR.Close()
		ctlW.Close()
		return fail(fmt.Errorf("reaper: pipe: %w", err))
	}
	childEnds = append(childEnds, ctlR, stW)

	// Guardian fds: 0-2 provider stdio, 3 control, 4 status, then the
	// ExecFile (see internal/guardian).
	files := []uintptr{inR.Fd(), outW.Fd(), errW.Fd(), ctlR.Fd(), stW.Fd()}
	gs := guardian.Spec{Path: spec.Path, Argv: append([]string{spec.Path}, spec.Args...), Dir: spec.Dir,
		Mode: string(s.mode), ExecFD: -1}
	plan := spec.Sandbox
	if plan != nil && plan.JoinNetNS > 0 {
		// The network namespace to join (internal/egress) is handed to the
		// guardian, and the plan names it by the guardian's number.
		gs.NetNSFD = len(files)
		files = append(files, uintptr(plan.JoinNetNS))
		p := *plan
		p.JoinNetNS = gs.NetNSFD
		plan = &p
	}
	if pj := planJSON(plan); pj != "" {
		gs.Sandbox, gs.Launch = pj, s.guardianPath
	}
	if spec.ExecFile != nil {
		fd := int(spec.ExecFile.Fd())
		gs.ExecFD = len(files)
		files = append(files, uintptr(fd))
		gs.ExecScript = isScript(fd)
		if gs.ExecScript {
			// The interpreter must be able to open the script by this name.
			gs.Path = "/proc/self/fd/3"
		} else {
			// Close-on-exec in the provider: resolved by execve, then closed.
			gs.Path = "/proc/self/fd/" + strconv.Itoa(gs.ExecFD)
		}
	}
	gpidfd := -1
	attr := &syscall.ProcAttr{Dir: "/", Env: spec.Env, Files: files,
		Sys: &syscall.SysProcAttr{Setpgid: true, PidFD: &gpidfd}}
	g := newGuardianConn(ctlW)
	t.g = g

	// The registry lock is held across fork so the reaper cannot see the
	// guardian exit before it is registered.
	s.c.mu.Lock()
	gpid, err := s.c.fork.forkExec(s.guardianPath, []string{s.guardianPath, GuardianArg}, attr)
	if err != nil {
		s.c.mu.Unlock()
		closeAll(childEnds)
		closeAll(parentEnds)
		ctlW.Close()
		stR.Close()
		return fail(fmt.Errorf("reaper: start guardian %s: %w", s.guardianPath, err))
	}
	g.pid = gpid
	s.c.guardians[gpid] = t
	s.c.mu.Unlock()
	if gpidfd >= 0 {
		unix.Close(gpidfd) // not needed: the guardian is reaped, never signalled
	}
	if spec.ExecFile != nil {
		runtime.KeepAlive(spec.ExecFile)
	}
	closeAll(childEnds)
	go t.readStatus(g, stR)
	b, _ := json.Marshal(gs)
	g.send(json.RawMessage(b))

	var ev guardian.Event
	select {
	case ev = <-g.started:
	case <-g.done:
		select {
		case ev = <-g.started:
		default:
			ev = guardian.Event{Ev: "fail", Msg: "guardian exited before starting the provider"}
		}
	case <-time.After(guardianStartTimeout):
		ev = guardian.Event{Ev: "fail", Msg: "guardian did not start the provider within " + guardianStartTimeout.String()}
	}
	if ev.Ev != "started" {
		g.closeCtl() // the guardian kills whatever it started, then exits
		closeAll(parentEnds)
		waitAny(guardianGiveUp+time.Second, g.done)
		if ev.Sandbox {
			return fail(fmt.Errorf("reaper: start %s: %w: %s", spec.Path, launchexec.ErrSandbox, ev.Msg))
		}
		return fail(fmt.Errorf("reaper: start %s: %s", spec.Path, ev.Msg))
	}
	now := time.Now()
	s.c.mu.Lock()
	t.mu.Lock()
	t.id.pid, t.id.pgid, t.id.start, t.id.startedAt = ev.Pid, ev.Pid, ev.Start, now
	t.addMemberLocked(procKey{pid: ev.Pid, start: ev.Start}, RoleProvider, now)
	t.mu.Unlock()
	s.c.register(t)
	s.c.mu.Unlock()
	t.stdio.Stdin, t.stdio.Stdout, t.stdio.Stderr = inW, outR, errR
	s.log.Debug("reaper: provider started", zap.Int("pid", ev.Pid), zap.Int("guardian", gpid),
		zap.String("path", spec.Path), zap.String("containment", string(s.mode)))
	return t, nil
}
