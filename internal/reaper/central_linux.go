//go:build linux

package reaper

import (
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/procfs"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// trackInterval is how often trees without a cgroup are re-walked in /proc
// so descendants are known before they are orphaned.
const trackInterval = 100 * time.Millisecond

// central is the process-wide reaper: the only code in this process that
// waits for children. It is shared by every Supervisor (refcounted) because
// wait(-1) cannot be split between owners.
type central struct {
	log *zap.Logger

	// reapMu serializes reaping with signals that rely on an unreaped
	// leader pinning its process-group id (docs/rules.md#r22).
	reapMu sync.Mutex

	mu      sync.Mutex // registry; lock order: c.mu before t.mu
	leaders map[int]*Tree
	trees   map[*Tree]struct{}
	// guardians maps a live guardian's pid to its tree; removed when the
	// guardian is reaped (not when the tree is unregistered).
	guardians map[int]*Tree
	// helpers maps a live helper process (a watchdog) to what to call
	// when it is reaped; it is never part of a tree.
	helpers map[int]func(unix.WaitStatus)

	// fork is the one thread that forks children (forker_linux.go).
	fork *forker
	// watch is the process's one inotify instance for cgroup.events (nil
	// if inotify is unavailable: waits then re-read every 5 ms).
	watch *cgroup.Watcher

	self  int
	sigch chan os.Signal
	stop  chan struct{}
	done  chan struct{}
}

var (
	globalMu   sync.Mutex
	globalRefs int
	globalC    *central
)

func acquireCentral(log *zap.Logger) *central {
	globalMu.Lock()
	defer globalMu.Unlock()
	if globalC == nil {
		c := &central{
			log:       log,
			leaders:   map[int]*Tree{},
			trees:     map[*Tree]struct{}{},
			guardians: map[int]*Tree{},
			helpers:   map[int]func(unix.WaitStatus){},
			self:      os.Getpid(),
			sigch:     make(chan os.Signal, 1),
			stop:      make(chan struct{}),
			done:      make(chan struct{}),
		}
		c.fork = newForker()
		if w, err := cgroup.NewWatcher(); err == nil {
			c.watch = w
		} else {
			log.Warn("reaper: no inotify for cgroup.events; waits re-read the file", zap.Error(err))
		}
		signal.Notify(c.sigch, syscall.SIGCHLD)
		go c.run()
		globalC = c
	}
	globalRefs++
	return globalC
}

// ReapsChildren reports whether a Supervisor's central reaper runs in this
// process: it waits for every child of the process, so no other waiter
// (internal/reaper/tablemode's) may run beside it.
func ReapsChildren() bool {
	globalMu.Lock()
	defer globalMu.Unlock()
	return globalC != nil
}

func releaseCentral() {
	globalMu.Lock()
	defer globalMu.Unlock()
	globalRefs--
	if globalRefs > 0 {
		return
	}
	c := globalC
	globalC = nil
	close(c.stop)
	<-c.done
	signal.Stop(c.sigch)
	c.reapPass() // final sweep: nothing this process started stays a zombie
	if c.watch != nil {
		c.watch.Close()
	}
	c.fork.stop()
}

func (c *central) run() {
	defer close(c.done)
	tick := time.NewTicker(trackInterval)
	defer tick.Stop()
	c.reapPass()
	for {
		select {
		case <-c.stop:
			return
		case <-c.sigch:
			c.reapPass()
		case <-tick.C:
			// Safety net for coalesced SIGCHLDs, and tracking of trees
			// that have no cgroup.
			c.reapPass()
			c.trackPass()
		}
	}
}

// reapRegistered reaps pid, an exited child registered as a helper or a
// guardian (what names which): wait4 (retried on EINTR), then forget
// (called under c.mu) drops its registration and done gets its status.
// It reports false when wait4 failed (logged; the pass stops).
func (c *central) reapRegistered(pid int, what string, forget func(), done func(unix.WaitStatus)) bool {
	ws, _, err := procfs.Wait4NoHang(pid)
	if err != nil {
		c.log.Warn("reaper: wait4 of "+what+" failed", zap.Int("pid", pid), zap.Error(err))
		return false
	}
	c.mu.Lock()
	forget()
	c.mu.Unlock()
	done(ws)
	return true
}

// reapPass reaps every exited child of this process. Each exited child is
// first peeked (WNOWAIT) so its /proc entries can still be read to attribute
// it to a tree, then reaped with wait4(pid).
func (c *central) reapPass() {
	c.reapMu.Lock()
	defer c.reapMu.Unlock()
	for {
		pid := procfs.PeekExited()
		if pid <= 0 {
			return // no children, or none exited
		}
		c.mu.Lock()
		gt := c.guardians[pid]
		hf := c.helpers[pid]
		c.mu.Unlock()
		switch {
		case hf != nil:
			if !c.reapRegistered(pid, "helper", func() { delete(c.helpers, pid) }, hf) {
				return
			}
			continue
		case gt != nil:
			if !c.reapRegistered(pid, "guardian", func() { delete(c.guardians, pid) }, gt.guardianReapedStatus) {
				return
			}
			continue
		}
		owners, key := c.attribute(pid)
		ws, wpid, err := procfs.Wait4NoHang(pid)
		if err != nil || wpid != pid {
			c.log.Warn("reaper: wait4 after waitid peek failed", zap.Int("pid", pid), zap.Error(err))
			return
		}
		now := time.Now()
		if len(owners) == 0 {
			c.log.Info("reaper: reaped a child that belongs to no tracked tree", zap.Int("pid", pid))
			continue
		}
		for _, t := range owners {
			if key.pid == t.id.pid {
				c.mu.Lock()
				if c.leaders[pid] == t {
					delete(c.leaders, pid)
				}
				c.mu.Unlock()
			}
			t.recordExit(key, ws, now)
		}
	}
}

// attribute finds the trees an exited (zombie) child belongs to (see
// ownersLocked).
func (c *central) attribute(pid int) ([]*Tree, procKey) {
	info, infoOK := readStat(pid)
	key := procKey{pid: pid, start: info.start}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.leaders[pid]; t != nil {
		return []*Tree{t}, procKey{pid: pid, start: t.id.start}
	}
	if !infoOK {
		return nil, key
	}
	return c.ownersLocked(pid, info), key
}

// ownersLocked attributes a child of this process that is not a guardian
// (c.mu held). Only guardians are started here and the guardian is a child
// subreaper, so every other child is a descendant of a guardian that died
// with its tree not empty, re-parented to us: a tree's leader (pid pinned
// while unreaped) belongs to its tree; a known member (pid + start time)
// to the trees that know it; a process inside a tree's cgroup to that
// tree; anything else to EVERY registered tree whose guardian died early
// (ambiguous: each of them must see it gone), and to every direct cgroup
// tree (no guardian) being terminated: such a child is a process that
// moved itself out of its cgroup, re-parented here. A tree whose guardian
// reported "empty" before exiting left no orphan, so it is never a
// candidate by that last rule.
func (c *central) ownersLocked(pid int, info procInfo) []*Tree {
	if t := c.leaders[pid]; t != nil && info.start == t.id.start {
		return []*Tree{t}
	}
	key := procKey{pid: pid, start: info.start}
	var out []*Tree
	for t := range c.trees {
		if t.hasMember(key) {
			out = append(out, t)
		}
	}
	if len(out) > 0 {
		return out
	}
	if cg, ok := readCgroupV2(pid); ok {
		for t := range c.trees {
			if t.cg.rel != "" && cgroup.Within(cg, t.cg.rel) {
				return []*Tree{t}
			}
		}
	}
	for t := range c.trees {
		if t.guardianDiedEarly() || t.g == nil && t.terminating.Load() {
			out = append(out, t)
		}
	}
	return out
}

// trackPass walks /proc once for all trees whose guardian died before
// reporting the tree empty (never for a direct cgroup tree: its cgroup
// holds its processes), so that their descendants are known (pid +
// start time) before they can be orphaned, and attributes live adopted
// orphans. A tree whose guardian lives is tracked and reaped by it.
func (c *central) trackPass() {
	c.mu.Lock()
	var ts []*Tree
	for t := range c.trees {
		if t.g != nil && t.guardianDiedEarly() {
			ts = append(ts, t)
		}
	}
	c.mu.Unlock()
	if len(ts) == 0 {
		return
	}
	snap := scanProcs()
	c.adoptOrphans(snap)
	for _, t := range ts {
		if t.cg.path != "" {
			t.trackCgroup(time.Now())
		}
		t.track(snap)
	}
}

// adoptOrphans records live children of this process that are not
// guardians as members of the trees they are attributed to (ownersLocked).
func (c *central) adoptOrphans(snap snapshot) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for pid, p := range snap.procs {
		if p.ppid != c.self || p.state == 'Z' || c.guardians[pid] != nil || c.helpers[pid] != nil {
			continue
		}
		for _, t := range c.ownersLocked(pid, p) {
			t.addMember(procKey{pid: pid, start: p.start}, now)
		}
	}
}

// sweepChildren is one pass over the direct children of this process for
// tree t (whose guardian died before reporting the tree empty): every live
// child that is not a guardian and is attributed to t (ownersLocked) is
// recorded as a member of t and, if sig is not 0, signalled with sig
// (SIGTERM and SIGKILL at most once each per process) through a pidfd
// opened while it cannot be reaped (reapMu held; we are its only reaper),
// so the pidfd is pinned to exactly that process. Guardians and children
// attributed only to other trees are never touched.
//
// The list of children (central.children: the forking thread's and the
// main thread's lists) is re-read until a read shows no child that was
// not examined yet: a child listed alive that exits hands its own
// children to us, possibly after the list was read, and it shows as a
// zombie by the time its state is read. Since nothing is reaped meanwhile,
// the list only grows; when a re-read adds nothing, every child present
// at that re-read was examined, so a live descendant of a dead guardian
// (whose topmost live ancestor is always a child of ours) cannot have been
// missed. The re-reads are bounded (sweepRereads); reaching the bound
// counts as a live child found. It returns how many live children of t it
// found and the delivery errors.
func (c *central) sweepChildren(t *Tree, sig unix.Signal) (int, []string) {
	c.reapMu.Lock()
	defer c.reapMu.Unlock()
	now := time.Now()
	n := 0
	var errs []string
	examined := map[int]bool{}
	for i := 0; ; i++ {
		fresh := false
		for _, pid := range c.children() {
			if examined[pid] {
				continue
			}
			examined[pid], fresh = true, true
			c.mu.Lock()
			// Another direct provider (our unreaped child: pid pinned), a
			// guardian or a helper: not t's, no /proc read needed.
			lt := c.leaders[pid]
			skip := lt != nil && lt != t && lt.g == nil || c.guardians[pid] != nil || c.helpers[pid] != nil
			c.mu.Unlock()
			if skip {
				continue
			}
			p, ok := readStat(pid)
			if !ok || p.state == 'Z' || p.ppid != c.self {
				continue
			}
			c.mu.Lock()
			owners := c.ownersLocked(pid, p)
			c.mu.Unlock()
			if !slices.Contains(owners, t) {
				continue
			}
			n++
			k := procKey{pid: pid, start: p.start}
			outside := ""
			if t.cg.rel != "" && !t.isLeader(k) {
				if cg, ok := readCgroupV2(pid); ok && !cgroup.Within(cg, t.cg.rel) {
					outside = cg
				}
			}
			if err := t.signalChild(k, sig, now, outside); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if !fresh {
			return n, errs
		}
		if i >= sweepRereads {
			return n + 1, errs
		}
	}
}

// sweepRereads bounds the re-reads of one sweepChildren pass.
const sweepRereads = 64

// signalChild records k (a live child of this process, pinned: reapMu
// held) as a member of t (outside: the cgroup it was found in, when it had
// left t's) and sends it sig (0 = none), SIGTERM and SIGKILL at most once
// each.
func (t *Tree) signalChild(k procKey, sig unix.Signal, now time.Time, outside string) error {
	t.mu.Lock()
	m := t.addMemberLocked(k, RoleDescendant, now)
	if outside != "" {
		m.outside = outside
	}
	t.mu.Unlock()
	if sig == 0 || !t.claimSignal(k, sig, RoleDescendant) {
		return nil
	}
	return t.signalMember(k, sig)
}

func (c *central) register(t *Tree) {
	c.leaders[t.id.pid] = t
	c.trees[t] = struct{}{}
}

func (c *central) unregister(t *Tree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.trees, t)
	if c.leaders[t.id.pid] == t {
		delete(c.leaders, t.id.pid)
	}
}
