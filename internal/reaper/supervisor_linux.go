//go:build linux

package reaper

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// Supervisor launches provider trees and owns all child reaping of this
// process (see the package doc). Safe for concurrent use.
type Supervisor struct {
	mode     Mode
	log      *zap.Logger
	cgParent string // absolute; "" unless ModeCgroup
	// cgMade are the directories NewSupervisor made for cgParent, its own
	// and missing ancestors' (outermost first); Close removes them.
	cgMade   []string
	cgMount  string
	c        *central
	wd       *watchdogConn // ModeCgroup only; replaced if it dies (watchdog_linux.go)
	restarts sync.WaitGroup

	guardianPath string // absolute

	// v1Parents are the per-Supervisor parent directories made in cgroup
	// v1 hierarchies for limits (limits_linux.go); removed at Close.
	v1Parents map[string]bool

	mu     sync.Mutex // held for the whole of Start, so Seal is exact
	sealed bool
	closed bool
	trees  map[*Tree]struct{}
}

// selfExe names the running sidecar's own image (proc(5)): exec of it runs
// the inode this process was started from, whatever now sits at its path.
const selfExe = "/proc/self/exe"

// validName reports whether a Spec.Name matches ^[A-Za-z0-9._-]{1,64}$
// (by hand, not a regexp compiled at every start of the binary).
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Verified.Method texts of complete proofs (docs/protocol.md §12 `verified`).
const (
	// methodCgroup: ModeCgroup (no guardian). After "populated 0" every
	// process of the tree that was in the cgroup is gone, and one that had
	// moved itself out of it is either a member we track or, once its
	// parent died, a child of this process (a subreaper): two clean passes
	// over both, a reap cycle apart, leave none. outsideNoteLocked may
	// append the processes that had left the cgroup.
	methodCgroup = "cgroup.events populated 0; two consecutive passes, a reap cycle apart, found no live process of the tree outside the cgroup (no live child of the sidecar attributable to the tree, no live tracked process)"
	// methodGuardian: guardian alive until the end, subreaper and
	// process-group modes.
	methodGuardian = "guardian reaped every descendant; no live process with the guardian as ancestor"
	// methodProc: the guardian died before the tree was empty. Every live
	// descendant of a dead guardian has a live ancestor chain ending at a
	// child of the sidecar (a subreaper), so no attributable live child
	// means no live descendant.
	methodProc = "guardian died: two consecutive passes, a reap cycle apart, found no live child of the sidecar attributable to the tree and no live tracked process (/proc scan)"
)

// unwatchCgroup tells the watchdog a provider cgroup was proven empty and
// removed.
func (s *Supervisor) unwatchCgroup(dir string) {
	s.mu.Lock()
	wd := s.wd
	s.mu.Unlock()
	if wd != nil {
		wd.remove(dir)
	}
}

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
		if _, err := os.Executable(); err != nil {
			return nil, fmt.Errorf("%w: cannot find this executable to re-execute as guardian: %v", ErrUnsupported, err)
		}
		// The running image itself, not the file at its path: an agent
		// that can write where the binary was installed may replace that
		// file, and a re-exec by path would then run the agent's program
		// outside every sandbox (as moby/sys reexec.Self does).
		gpath = selfExe
	}
	if !filepath.IsAbs(gpath) {
		return nil, fmt.Errorf("reaper: GuardianPath %q is not absolute", gpath)
	}
	if err := unix.Access(gpath, unix.X_OK); err != nil {
		return nil, fmt.Errorf("%w: guardian %s is not executable: %v", ErrUnsupported, gpath, err)
	}
	s := &Supervisor{mode: mode, log: log, trees: map[*Tree]struct{}{}, guardianPath: gpath}
	if mode == ModeCgroup {
		mount, err := cgroup.Mount()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		s.cgMount = mount
		s.cgParent = opts.CgroupParent
		if s.cgParent == "" {
			s.cgParent = filepath.Join(mount, "acpx-sidecar-"+strconv.Itoa(os.Getpid()))
			sweepStaleParents(mount, log)
			cgroup.SweepStaleV1Parents(log)
		}
		s.cgParent = filepath.Clean(s.cgParent)
		if err := parentBelow(mount, s.cgParent); err != nil {
			return nil, err
		}
		made, err := mkdirAllMade(s.cgParent)
		s.cgMade = made
		if err != nil {
			s.removeMade()
			return nil, fmt.Errorf("reaper: create cgroup parent: %w", err)
		}
	}
	s.c = acquireCentral(log)
	if mode == ModeCgroup {
		s.mu.Lock()
		wd, err := startWatchdog(gpath, s.c, s.watchdogReaped)
		s.wd = wd
		s.mu.Unlock()
		if err != nil {
			releaseCentral()
			return nil, err
		}
	}
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
// first: every tree still registered is killed exactly as if the sidecar
// had died, and gets no proof. In ModeCgroup Close closes the watchdog's
// pipe (it cgroup.kills every cgroup still registered) and waits for the
// watchdog; in the other modes it closes each guardian's control pipe
// (TERM, 250 ms, KILL) and waits for those guardians; up to about 11 s in
// all. Idempotent.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	trees := s.trees
	s.trees = nil
	wd := s.wd
	s.mu.Unlock()
	s.restarts.Wait()
	for t := range trees {
		s.c.unregister(t)
		t.closeFDs()
		if t.g != nil {
			t.g.closeCtl()
		}
	}
	if wd != nil {
		s.mu.Lock()
		wd = s.wd // a restart may have replaced it
		s.mu.Unlock()
		wd.close()
	}
	deadline := time.Now().Add(guardianGiveUp + time.Second)
	if wd != nil && !waitAny(time.Until(deadline), wd.reaped) {
		s.log.Warn("reaper: watchdog not reaped at Close", zap.Int("watchdog", wd.pid))
	}
	for t := range trees {
		if t.g != nil && !waitAny(time.Until(deadline), t.g.reaped) {
			s.log.Warn("reaper: guardian not reaped at Close", zap.Int("guardian", t.g.pid))
		}
	}
	releaseCentral()
	s.removeV1Parents()
	if s.cgParent != "" {
		if err := os.Remove(s.cgParent); err != nil && !errors.Is(err, os.ErrNotExist) {
			// Another Supervisor may still have children there (EBUSY).
			s.log.Info("reaper: cgroup parent not removed", zap.String("cgroup", s.cgParent), zap.Error(err))
		}
		s.removeMade()
	}
	return nil
}

// removeMade removes the directories NewSupervisor made (innermost first);
// one another process uses (EBUSY, ENOTEMPTY) is left.
func (s *Supervisor) removeMade() {
	for i := len(s.cgMade) - 1; i >= 0; i-- {
		_ = os.Remove(s.cgMade[i])
	}
}

// parentBelow refuses a cgroup parent that is not strictly below the
// cgroup2 mount.
func parentBelow(mount, parent string) error {
	if rel, err := filepath.Rel(mount, parent); err != nil || rel == "." || rel == ".." || len(rel) >= 3 && rel[:3] == "../" {
		return fmt.Errorf("reaper: CgroupParent %s is not below the cgroup2 mount %s", parent, mount)
	}
	return nil
}

// CheckCgroupParent reports whether parent (absolute; "" = the default, one
// per sidecar below the cgroup2 mount) can be a Supervisor's CgroupParent
// in ModeCgroup: below the cgroup2 mount, and the directory or its nearest
// existing ancestor a writable cgroup directory. It makes nothing
// (`doctor`). Errors: ErrUnsupported without cgroup v2, or the reason.
func CheckCgroupParent(parent string) error {
	mount, err := cgroup.Mount()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	if parent == "" {
		return nil
	}
	parent = filepath.Clean(parent)
	if err := parentBelow(mount, parent); err != nil {
		return err
	}
	dir := parent
	for {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		dir = filepath.Dir(dir)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fmt.Errorf("reaper: CgroupParent %s: %s is not writable: %v", parent, dir, err)
	}
	return nil
}

// mkdirAllMade is os.MkdirAll(dir, 0755) that returns the directories it
// made, outermost first (also those made before an error).
func mkdirAllMade(dir string) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		missing = append(missing, d)
	}
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return made, err
		} else if err == nil {
			made = append(made, missing[i])
		}
	}
	return made, nil
}

func (s *Supervisor) forget(t *Tree) {
	s.mu.Lock()
	if s.trees != nil {
		delete(s.trees, t)
	}
	s.mu.Unlock()
}

// sweepStaleParents removes the empty default cgroup parents
// (<mount>/acpx-sidecar-<pid>) of sidecars that are gone, e.g. SIGKILLed:
// their watchdog removed the provider cgroups but nobody removed the
// parent. A populated one is left alone (the ownership ledger's recovery
// kills what is in it, then the next sweep removes it). A pid that is alive
// again (recycled) keeps its directory until a later sweep.
func sweepStaleParents(mount string, log *zap.Logger) {
	for _, p := range cgroup.OtherSidecarParents(mount) {
		if _, alive := readStat(p.Pid); alive {
			continue
		}
		dir := p.Dir
		if pop, err := cgroup.Populated(dir); err != nil || pop {
			continue
		}
		if err := cgroup.RemoveSubtree(dir); err == nil { // empty cgroups only, deepest first
			log.Info("removed a stale cgroup parent", zap.String("dir", dir))
		}
	}
}
