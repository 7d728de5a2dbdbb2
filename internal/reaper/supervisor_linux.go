//go:build linux

package reaper

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Supervisor launches provider trees and owns all child reaping of this
// process (see the package doc). Safe for concurrent use.
type Supervisor struct {
	mode     Mode
	log      *zap.Logger
	cgParent string // absolute; "" unless ModeCgroup
	cgMount  string
	c        *central

	guardianPath string // absolute

	mu     sync.Mutex // held for the whole of Start, so Seal is exact
	sealed bool
	closed bool
	trees  map[*Tree]struct{}
}

// cgSeq numbers cgroup directories process-wide (several Supervisors may
// share the default parent).
var cgSeq atomic.Uint64

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Verified.Method texts of complete proofs (docs/protocol.md §12 `verified`).
const (
	// methodCgroup: guardian alive until the end, cgroup mode. The guardian
	// is a child subreaper, so "no child left" means no descendant left,
	// whichever cgroup it had moved to; outsideNoteLocked may append the
	// processes that had left the cgroup.
	methodCgroup = "cgroup.events populated 0; guardian reaped every descendant (no live process with the guardian as ancestor, inside the cgroup or not)"
	// methodGuardian: guardian alive until the end, subreaper and
	// process-group modes.
	methodGuardian = "guardian reaped every descendant; no live process with the guardian as ancestor"
	// methodProc: the guardian died before the tree was empty (modes
	// without a cgroup). Every live descendant of a dead guardian has a
	// live ancestor chain ending at a child of the sidecar (a subreaper),
	// so no attributable live child means no live descendant.
	methodProc = "guardian died: two consecutive passes, a reap cycle apart, found no live child of the sidecar attributable to the tree and no live tracked process (/proc scan)"
	// methodCgroupFallback: the same, cgroup mode.
	methodCgroupFallback = "cgroup.events populated 0; guardian died: two consecutive passes, a reap cycle apart, found no live child of the sidecar attributable to the tree and no live tracked process (/proc scan)"
)

// NewSupervisor starts (or joins) the single process-wide reaping
// goroutine. This process must already be a child subreaper (call
// BecomeSubreaper first; cmd/acpx-sidecar does): NewSupervisor changes no
// process attribute itself, and without that the tree of a killed guardian
// would re-parent past the sidecar, out of sight of its fallback checks.
// Errors: ErrUnsupported (wrapped) if the requested or any mode is
// unavailable; ErrNotSubreaper; prctl or cgroup directory errors.
func NewSupervisor(opts Options) (*Supervisor, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	mechs := Detect()
	avail := map[Mode]Mechanism{}
	for _, m := range mechs {
		avail[m.Mode] = m
	}
	mode := opts.Mode
	switch mode {
	case "":
		for _, m := range mechs {
			if m.Available {
				mode = m.Mode
				break
			}
		}
		if mode == "" {
			return nil, fmt.Errorf("%w: %s; %s", ErrUnsupported, avail[ModeCgroup].Reason, avail[ModeProcessGroup].Reason)
		}
	case ModeCgroup, ModeProcessGroup:
		if !avail[mode].Available {
			return nil, fmt.Errorf("%w: %s: %s", ErrUnsupported, mode, avail[mode].Reason)
		}
	case ModeSubreaper:
		if !avail[mode].Available && opts.GuardianPath == "" {
			return nil, fmt.Errorf("%w: %s: %s", ErrUnsupported, mode, avail[mode].Reason)
		}
	default:
		return nil, fmt.Errorf("%w: unknown mode %q", ErrUnsupported, mode)
	}
	switch sub, err := isSubreaper(); {
	case err != nil:
		return nil, err
	case !sub:
		return nil, ErrNotSubreaper
	}
	gpath := opts.GuardianPath
	if gpath == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("%w: cannot find this executable to re-execute as guardian: %v", ErrUnsupported, err)
		}
		gpath = exe
	}
	if !filepath.IsAbs(gpath) {
		return nil, fmt.Errorf("reaper: GuardianPath %q is not absolute", gpath)
	}
	if err := unix.Access(gpath, unix.X_OK); err != nil {
		return nil, fmt.Errorf("%w: guardian %s is not executable: %v", ErrUnsupported, gpath, err)
	}
	s := &Supervisor{mode: mode, log: log, trees: map[*Tree]struct{}{}, guardianPath: gpath}
	if mode == ModeCgroup {
		mount, err := cgroup2Mount()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		s.cgMount = mount
		s.cgParent = opts.CgroupParent
		if s.cgParent == "" {
			s.cgParent = filepath.Join(mount, "acpx-sidecar-"+strconv.Itoa(os.Getpid()))
			sweepStaleParents(mount, log)
		}
		s.cgParent = filepath.Clean(s.cgParent)
		if rel, err := filepath.Rel(mount, s.cgParent); err != nil || rel == "." || rel == ".." || len(rel) >= 3 && rel[:3] == "../" {
			return nil, fmt.Errorf("reaper: CgroupParent %s is not below the cgroup2 mount %s", s.cgParent, mount)
		}
		if err := os.MkdirAll(s.cgParent, 0o755); err != nil {
			return nil, fmt.Errorf("reaper: create cgroup parent: %w", err)
		}
	}
	s.c = acquireCentral(log)
	return s, nil
}

// Mode returns the containment mode every Tree of this Supervisor uses.
func (s *Supervisor) Mode() Mode { return s.mode }

// Seal makes every later Start fail with ErrSealed, launching nothing
// (docs/rules.md#r21). A Start in progress when Seal is called completes
// first (Seal waits for it), so the caller sees every tree it must terminate.
func (s *Supervisor) Seal() {
	s.mu.Lock()
	s.sealed = true
	s.mu.Unlock()
}

// Close stops this Supervisor's use of the reaping goroutine (the goroutine
// ends when the last Supervisor of the process closes, after a final reap
// sweep) and removes the cgroup parent if it is empty. Terminate trees
// first: Close closes the control pipe of every tree still registered, so
// its guardian kills that tree exactly as if the sidecar had died (TERM,
// 250 ms, KILL), and waits (up to about 11 s) for those guardians to exit
// and be reaped; such trees get no proof. Idempotent.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	trees := s.trees
	s.trees = nil
	s.mu.Unlock()
	for t := range trees {
		s.c.unregister(t)
		t.closeFDs()
		if t.g != nil {
			t.g.closeCtl()
		}
	}
	deadline := time.Now().Add(guardianGiveUp + time.Second)
	for t := range trees {
		if t.g != nil && !waitAny(time.Until(deadline), t.g.reaped) {
			s.log.Warn("reaper: guardian not reaped at Close", zap.Int("guardian", t.g.pid))
		}
	}
	releaseCentral()
	if s.cgParent != "" {
		if err := os.Remove(s.cgParent); err != nil && !errors.Is(err, os.ErrNotExist) {
			// Another Supervisor may still have children there (EBUSY).
			s.log.Info("reaper: cgroup parent not removed", zap.String("cgroup", s.cgParent), zap.Error(err))
		}
	}
	return nil
}

func (s *Supervisor) forget(t *Tree) {
	s.mu.Lock()
	if s.trees != nil {
		delete(s.trees, t)
	}
	s.mu.Unlock()
}

// Start launches spec as a new provider tree behind its own guardian (see
// guardian_linux.go): the sidecar starts the guardian (Options.GuardianPath
// with argv[1] GuardianArg, in its own process group, environment
// Spec.Env), which forks the provider in its own process group, inside its
// own cgroup in ModeCgroup (no window outside it; the guardian itself stays
// outside). Stdin/Stdout/Stderr are pipes owned by the caller, connected
// directly to the provider (the guardian holds no copy). Start returns once
// the guardian reported the provider's pid, at most 10 s.
// Errors: ErrSealed, ErrClosed, invalid spec, cgroup, guardian or
// fork/exec errors (which name Path, never Env).
func (s *Supervisor) Start(spec Spec) (*Tree, error) {
	if !filepath.IsAbs(spec.Path) {
		return nil, fmt.Errorf("reaper: Path %q is not absolute", spec.Path)
	}
	name := spec.Name
	if name == "" {
		name = "provider"
	}
	if !nameRE.MatchString(name) {
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

	t := &Tree{s: s, c: s.c, mode: s.mode, pidfd: -1, exited: make(chan struct{}),
		members: map[procKey]*member{}}

	cgfd := -1
	if s.mode == ModeCgroup {
		if err := os.MkdirAll(s.cgParent, 0o755); err != nil {
			return nil, fmt.Errorf("reaper: create cgroup parent: %w", err)
		}
		dir := filepath.Join(s.cgParent, fmt.Sprintf("%s-%d", name, cgSeq.Add(1)))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("reaper: create cgroup: %w", err)
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			os.Remove(dir)
			return nil, fmt.Errorf("reaper: open cgroup: %w", err)
		}
		defer unix.Close(fd)
		cgfd = fd
		t.cgPath = dir
		t.cgRel = "/" + mustRel(s.cgMount, dir)
	}
	fail := func(err error) (*Tree, error) {
		if t.cgPath != "" {
			_ = removeCgroupSubtree(t.cgPath)
		}
		return nil, err
	}
	if err := applyLimits(t.cgPath, spec.Limits); err != nil {
		return fail(err)
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
	// cgroup dir and the ExecFile (see guardian_linux.go).
	files := []uintptr{inR.Fd(), outW.Fd(), errW.Fd(), ctlR.Fd(), stW.Fd()}
	gs := guardianSpec{Path: spec.Path, Argv: append([]string{spec.Path}, spec.Args...), Dir: spec.Dir,
		Mode: s.mode, Cgroup: t.cgPath, CgroupRel: t.cgRel, CgroupFD: -1, ExecFD: -1}
	if cgfd >= 0 {
		gs.CgroupFD = len(files)
		files = append(files, uintptr(cgfd))
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
	gpid, err := syscall.ForkExec(s.guardianPath, []string{s.guardianPath, GuardianArg}, attr)
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

	var ev guardianEvent
	select {
	case ev = <-g.started:
	case <-g.done:
		select {
		case ev = <-g.started:
		default:
			ev = guardianEvent{Ev: "fail", Msg: "guardian exited before starting the provider"}
		}
	case <-time.After(guardianStartTimeout):
		ev = guardianEvent{Ev: "fail", Msg: "guardian did not start the provider within " + guardianStartTimeout.String()}
	}
	if ev.Ev != "started" {
		g.closeCtl() // the guardian kills whatever it started, then exits
		closeAll(parentEnds)
		waitAny(guardianGiveUp+time.Second, g.done)
		if t.cgPath != "" {
			waitCgroupEmpty(nil, t.cgPath, time.Second, nil)
		}
		return fail(fmt.Errorf("reaper: start %s: %s", spec.Path, ev.Msg))
	}
	now := time.Now()
	s.c.mu.Lock()
	t.mu.Lock()
	t.pid, t.pgid, t.start, t.startedAt = ev.Pid, ev.Pid, ev.Start, now
	t.addMemberLocked(procKey{pid: ev.Pid, start: ev.Start}, RoleProvider, now)
	t.mu.Unlock()
	s.c.register(t)
	s.c.mu.Unlock()
	t.stdin, t.stdout, t.stderr = inW, outR, errR
	s.trees[t] = struct{}{}
	s.log.Debug("reaper: provider started", zap.Int("pid", ev.Pid), zap.Int("guardian", gpid),
		zap.String("path", spec.Path), zap.String("containment", string(s.mode)), zap.String("cgroup", t.cgPath))
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

func mustRel(base, p string) string {
	r, err := filepath.Rel(base, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

// ioCloser types for Tree accessors.
var (
	_ io.WriteCloser = (*os.File)(nil)
	_ io.ReadCloser  = (*os.File)(nil)
)

// sweepStaleParents removes the empty default cgroup parents
// (<mount>/acpx-sidecar-<pid>) of sidecars that are gone, e.g. SIGKILLed:
// their guardians removed the provider cgroups but nobody removed the
// parent. A populated one is left alone (the ownership ledger's recovery
// kills what is in it, then the next sweep removes it). A pid that is alive
// again (recycled) keeps its directory until a later sweep.
func sweepStaleParents(mount string, log *zap.Logger) {
	ents, err := os.ReadDir(mount)
	if err != nil {
		return
	}
	for _, e := range ents {
		pidText, ok := strings.CutPrefix(e.Name(), "acpx-sidecar-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || !e.IsDir() || pid == os.Getpid() {
			continue
		}
		if _, alive := readStat(pid); alive {
			continue
		}
		dir := filepath.Join(mount, e.Name())
		if pop, err := cgroupPopulated(dir); err != nil || pop {
			continue
		}
		if err := removeCgroupSubtree(dir); err == nil { // empty cgroups only, deepest first
			log.Info("removed a stale cgroup parent", zap.String("dir", dir))
		}
	}
}
