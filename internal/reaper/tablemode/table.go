//go:build linux || darwin

package tablemode

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/fdexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
)

// DefaultMarkerName is the environment variable whose "NAME=value" entry
// marks every process of a tree when Options.MarkerName is "". The
// sidecar passes its session marker (ACPX_SIDECAR_SESSION,
// internal/session.SessionMarkerEnv) instead.
const DefaultMarkerName = "ACPX_REAPER_TREE"

// Options configures a Supervisor.
type Options struct {
	// MarkerName is the environment variable that marks a tree: Start
	// takes the tree's marker from Spec.Env's "MarkerName=value" entry, or
	// adds one with a fresh value when Env has none. "" =
	// DefaultMarkerName.
	MarkerName string
	// Logger receives diagnostics (never launch env). nil = zap.NewNop().
	Logger *zap.Logger
	// Reader is the process table; nil = proctable.New().
	Reader proctable.Reader
}

// Supervisor launches provider trees under reaper.ModeProcessTable. It
// owns all waiting for children of this process, like reaper.Supervisor
// (the two cannot live in one process: New refuses while a
// reaper.Supervisor runs). Safe for concurrent use.
type Supervisor struct {
	log        *zap.Logger
	c          *tableCore
	markerName string

	mu     sync.Mutex // held for the whole of Start, so Seal is exact
	sealed bool
	closed bool
	trees  map[*Tree]struct{}
}

// New starts (or joins) the process-wide scanner and waiter
// of reaper.ModeProcessTable. On Linux the caller should make this
// process a child subreaper first (reaper.BecomeSubreaper; cmd/acpx-sidecar does): the
// orphans of a tree then re-parent here and are reaped with their exit
// status, the part launchd plays on macOS (on a host whose init does not
// reap they would otherwise stay zombies); tracking does not depend on it.
// Errors (reaper.ErrUnsupported, wrapped): no process-table reader for
// this system; a reaper.Supervisor owns child reaping in this process; the waiter
// (kqueue on Darwin) cannot be set up.
func New(opts Options) (*Supervisor, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	name := opts.MarkerName
	if name == "" {
		name = DefaultMarkerName
	}
	if strings.ContainsAny(name, "=\x00") {
		return nil, fmt.Errorf("reaper: MarkerName %q must not contain '=' or NUL", name)
	}
	c, err := acquireTableCore(log, opts.Reader)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", reaper.ErrUnsupported, reaper.ModeProcessTable, err)
	}
	return &Supervisor{log: log, c: c, markerName: name, trees: map[*Tree]struct{}{}}, nil
}

// Detect reports whether reaper.ModeProcessTable is usable here (a line of
// `acpx-sidecar doctor`): the process table can be read.
func Detect() reaper.Mechanism {
	if _, err := proctable.New(); err != nil {
		return reaper.Mechanism{Mode: reaper.ModeProcessTable, Reason: err.Error()}
	}
	return reaper.Mechanism{Mode: reaper.ModeProcessTable, Available: true, Reason: tableReason}
}

// Mode is reaper.ModeProcessTable.
func (s *Supervisor) Mode() reaper.Mode { return reaper.ModeProcessTable }

// CgroupParent is "": this mode makes no cgroups.
func (s *Supervisor) CgroupParent() string { return "" }

// Left as a copy of reaper.Supervisor's Seal/Close guard: other fields, other lock; only the flag handling is alike.

// Seal makes every later Start fail with reaper.ErrSealed, launching nothing
// (docs/rules.md#r21). A Start in progress completes first.
func (s *Supervisor) Seal() {
	s.mu.Lock()
	s.sealed = true
	s.mu.Unlock()
}

// Close stops this supervisor's use of the scanner and waiter (they stop
// with the last user, after a final reap pass). Terminate trees first:
// every tree still registered gets SIGKILL (its group while pinned, each
// live member of one scan) and no proof, the nearest this mode comes to
// "killed as if the sidecar had died". Idempotent.
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
		_ = t.signalGroup(syscall.SIGKILL)
		if sc, err := s.c.scanAfter(time.Now()); err == nil {
			t.signalLive(sc, syscall.SIGKILL)
		}
		s.c.unregister(t)
	}
	if len(trees) > 0 {
		s.c.w.reapNow()
	}
	releaseTableCore()
	return nil
}

func (s *Supervisor) forget(t *Tree) {
	s.mu.Lock()
	if s.trees != nil {
		delete(s.trees, t)
	}
	s.mu.Unlock()
}

// Start launches spec as a new tree: the provider is forked in its own
// process group with the tree's marker in its environment, registered
// with the waiter before it can be reaped. Stdin/Stdout/Stderr of the
// returned tree are pipes owned by the caller. Spec.Name is not used
// (there is no cgroup to name). Spec.Limits fail with
// reaper.ErrLimitsUnsupported, launching nothing (docs/protocol.md
// §18.2). Errors: reaper.ErrSealed, reaper.ErrClosed,
// reaper.ErrLimitsUnsupported, an invalid spec,
// fork/exec errors (which name Path, never Env).
func (s *Supervisor) Start(spec reaper.Spec) (*Tree, error) {
	if !filepath.IsAbs(spec.Path) {
		return nil, fmt.Errorf("reaper: Path %q is not absolute", spec.Path)
	}
	if spec.Limits.Any() {
		return nil, fmt.Errorf("%w: %s containment has no cgroup", reaper.ErrLimitsUnsupported, reaper.ModeProcessTable)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return nil, reaper.ErrSealed
	}
	if s.closed {
		return nil, reaper.ErrClosed
	}
	marker, env := s.markerOf(spec.Env)
	spec.Env = env
	t, err := s.startTable(spec, marker)
	if err != nil {
		return nil, err
	}
	s.trees[t] = struct{}{}
	s.log.Debug("reaper: provider started", zap.Int("pid", t.id.pid), zap.String("path", spec.Path),
		zap.String("containment", string(reaper.ModeProcessTable)))
	return t, nil
}

// closeFiles closes every file of fs.
func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// isScriptFD reports whether the open file starts with "#!" (read with
// pread, so its offset does not matter). Unreadable files are treated as
// scripts (the choice that works for both kinds).
func isScriptFD(fd int) bool {
	var b [2]byte
	n, err := unix.Pread(fd, b[:], 0)
	return err != nil || n == 2 && b[0] == '#' && b[1] == '!'
}

// markerOf returns the tree's marker entry and the environment holding it.
func (s *Supervisor) markerOf(env []string) (string, []string) {
	prefix := s.markerName + "="
	for _, e := range env {
		if strings.HasPrefix(e, prefix) && len(e) > len(prefix) {
			return e, env
		}
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	m := prefix + "t-" + hex.EncodeToString(b)
	return m, append(append([]string(nil), env...), m)
}

// startTable forks the provider (s.mu held).
func (s *Supervisor) startTable(spec reaper.Spec, marker string) (*Tree, error) {
	childEnds, parentEnds, err := reaper.StdioPipes()
	if err != nil {
		return nil, err
	}
	files := []uintptr{childEnds[0].Fd(), childEnds[1].Fd(), childEnds[2].Fd()}
	path := spec.Path
	if spec.ExecFile != nil {
		fd := int(spec.ExecFile.Fd())
		if isScriptFD(fd) {
			// The interpreter must be able to open the script by this name.
			files = append(files, uintptr(fd))
			path = fdPath(3)
		} else {
			// Close-on-exec in the provider: resolved by execve, then closed.
			path = fdPath(fd)
		}
	}
	argv := append([]string{spec.Path}, spec.Args...)
	attr := &syscall.ProcAttr{Dir: spec.Dir, Env: spec.Env, Files: files, Sys: &syscall.SysProcAttr{Setpgid: true}}
	t := &Tree{s: s, c: s.c, procs: s.c.procs, marker: marker, markerName: s.markerName, exited: make(chan struct{}),
		members: map[tableKey]*tableMember{}}
	// The reap lock and the registry are held across the fork, so the
	// waiter cannot collect the provider before it is registered.
	s.c.w.reapMu.Lock()
	s.c.mu.Lock()
	pid, err := fdexec.ForkExec(path, argv, attr)
	if err != nil {
		s.c.mu.Unlock()
		s.c.w.reapMu.Unlock()
		closeFiles(childEnds)
		closeFiles(parentEnds)
		return nil, fmt.Errorf("reaper: start %s: %w", spec.Path, err)
	}
	now := time.Now()
	p, _ := s.c.procs.Stat(pid) // unreaped: readable even if it already exited
	t.id.pid, t.id.pgid, t.id.start, t.id.startedAt = pid, pid, p.Start, now
	t.addLocked(tableKey{pid, p.Start}, now)
	s.c.registerLocked(t)
	s.c.mu.Unlock()
	s.c.w.watch(pid)
	s.c.w.reapMu.Unlock()
	if spec.ExecFile != nil {
		runtime.KeepAlive(spec.ExecFile)
	}
	closeFiles(childEnds)
	t.stdio.Stdin, t.stdio.Stdout, t.stdio.Stderr = parentEnds[0], parentEnds[1], parentEnds[2]
	return t, nil
}
