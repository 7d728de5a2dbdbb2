//go:build linux

package reaper

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
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
	// leader pinning its process-group id (SEED-BEHAVIOR 22).
	reapMu sync.Mutex

	mu      sync.Mutex // registry; lock order: c.mu before t.mu
	leaders map[int]*Tree
	trees   map[*Tree]struct{}
	// guardians maps a live guardian's pid to its tree; removed when the
	// guardian is reaped (not when the tree is unregistered).
	guardians map[int]*Tree

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
			self:      os.Getpid(),
			sigch:     make(chan os.Signal, 1),
			stop:      make(chan struct{}),
			done:      make(chan struct{}),
		}
		signal.Notify(c.sigch, syscall.SIGCHLD)
		go c.run()
		globalC = c
	}
	globalRefs++
	return globalC
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

// siginfoPid extracts si_pid from a siginfo filled by waitid: the union
// starts after three int32s, aligned to the pointer size.
func siginfoPid(info *unix.Siginfo) int {
	ps := unsafe.Sizeof(uintptr(0))
	off := (12 + ps - 1) / ps * ps
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}

// reapPass reaps every exited child of this process. Each exited child is
// first peeked (WNOWAIT) so its /proc entries can still be read to attribute
// it to a tree, then reaped with wait4(pid).
func (c *central) reapPass() {
	c.reapMu.Lock()
	defer c.reapMu.Unlock()
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return // ECHILD: no children
		}
		pid := siginfoPid(&info)
		if pid <= 0 {
			return // children exist, none exited
		}
		c.mu.Lock()
		gt := c.guardians[pid]
		c.mu.Unlock()
		if gt != nil {
			var ws unix.WaitStatus
			var err error
			for {
				if _, err = unix.Wait4(pid, &ws, unix.WNOHANG, nil); !errors.Is(err, unix.EINTR) {
					break
				}
			}
			if err != nil {
				c.log.Warn("reaper: wait4 of guardian failed", zap.Int("pid", pid), zap.Error(err))
				return
			}
			c.mu.Lock()
			delete(c.guardians, pid)
			c.mu.Unlock()
			gt.guardianReapedStatus(ws)
			continue
		}
		t, key := c.attribute(pid)
		var ws unix.WaitStatus
		var wpid int
		for {
			wpid, err = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if err != nil || wpid != pid {
			c.log.Warn("reaper: wait4 after waitid peek failed", zap.Int("pid", pid), zap.Error(err))
			return
		}
		now := time.Now()
		if t == nil {
			c.log.Info("reaper: reaped a child that belongs to no tracked tree", zap.Int("pid", pid))
			continue
		}
		if key.pid == t.pid {
			c.mu.Lock()
			if c.leaders[pid] == t {
				delete(c.leaders, pid)
			}
			c.mu.Unlock()
		}
		t.recordExit(key, ws, now)
	}
}

// attribute finds the tree an exited (zombie) child belongs to: the leader
// map, then known members (pid + start time), then its cgroup, then its
// process group, then the only tree without a cgroup.
func (c *central) attribute(pid int) (*Tree, procKey) {
	info, infoOK := readStat(pid)
	key := procKey{pid: pid, start: info.start}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.leaders[pid]; t != nil {
		return t, procKey{pid: pid, start: t.start}
	}
	if !infoOK {
		return nil, key
	}
	return c.attributeLocked(pid, info), key
}

// attributeLocked attributes a child of this process that is not a leader.
// Every such child is a re-parented descendant of some tree (we are a child
// subreaper and only trees are started here).
func (c *central) attributeLocked(pid int, info procInfo) *Tree {
	key := procKey{pid: pid, start: info.start}
	for t := range c.trees {
		if t.hasMember(key) {
			return t
		}
	}
	if cg, ok := readCgroupV2(pid); ok {
		for t := range c.trees {
			if t.cgRel != "" && cg == t.cgRel {
				return t
			}
		}
	}
	var only *Tree
	n := 0
	for t := range c.trees {
		if t.cgRel != "" {
			continue
		}
		if info.pgid == t.pgid {
			return t
		}
		only = t
		n++
	}
	if n == 1 {
		return only
	}
	return nil
}

// trackPass walks /proc once for all trees without a cgroup, so that their
// descendants are known (pid + start time) before they can be orphaned,
// and attributes live adopted orphans.
func (c *central) trackPass() {
	c.mu.Lock()
	var ts []*Tree
	for t := range c.trees {
		// A tree whose guardian lives is tracked and reaped by it.
		if t.cgRel == "" && (t.g == nil || !t.g.alive()) {
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
		t.track(snap)
	}
}

// adoptOrphans attributes live children of this process that are not
// leaders and not yet members of a tree.
func (c *central) adoptOrphans(snap snapshot) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for pid, p := range snap.procs {
		if p.ppid != c.self || p.state == 'Z' || c.leaders[pid] != nil || c.guardians[pid] != nil {
			continue
		}
		if t := c.attributeLocked(pid, p); t != nil {
			t.addMember(procKey{pid: pid, start: p.start}, now)
		}
	}
}

func (c *central) register(t *Tree) {
	c.leaders[t.pid] = t
	c.trees[t] = struct{}{}
}

func (c *central) unregister(t *Tree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.trees, t)
	if c.leaders[t.pid] == t {
		delete(c.leaders, t.pid)
	}
}
