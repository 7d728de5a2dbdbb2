//go:build linux || darwin

package tablemode

import (
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
)

// The process-table containment (reaper.ModeProcessTable) keeps no kernel
// object per tree: a tree is what the process table says it is. One
// process-wide tableCore (shared, refcounted, by every Supervisor, since
// waiting for children cannot be split between owners) holds:
//
//   - the registry of live trees: unreaped leaders by pid, trees by their
//     environment marker entry;
//   - the scanner: a read of the whole table (proctable.Reader.List) that
//     updates every live tree's member set (Tree.update), every
//     tableScanInterval while a tree lives and on demand while one is
//     terminated (scanAfter shares one read among concurrent callers);
//   - the environment reads (table_env.go): each process's environment is
//     read once (per pid and start time), off the scan's path, to find a
//     marker entry;
//   - the waiter (table_linux.go, table_darwin.go): reaps this process's
//     children and hands each wait status to the tree it belongs to.

// tableScanInterval is how often live trees are re-scanned so that a
// descendant is known (by its parent chain) before it is orphaned. It is
// also the window of what this mode cannot see: a process that leaves the
// group, clears the marker from its environment and is orphaned within
// one interval (docs/operations.md, "macOS").
const tableScanInterval = 100 * time.Millisecond

// tableKey is one process: its pid and start time (proctable.Proc.Start),
// so a recycled pid never matches.
type tableKey struct {
	pid   int
	start uint64
}

// tableScan is one read of the process table.
type tableScan struct {
	at       time.Time // when the read began
	procs    map[int]proctable.Proc
	children map[int][]int // ppid -> pids
	byPgid   map[int][]int // pgid -> pids
	marked   map[*Tree][]int
}

// tableCore is the process-wide state of reaper.ModeProcessTable (see above).
type tableCore struct {
	log   *zap.Logger
	procs proctable.Reader
	self  int
	w     *tableWaiter

	mu      sync.Mutex // registry; lock order: c.mu before t.mu
	leaders map[int]*Tree
	trees   map[*Tree]struct{}
	markers map[string]*Tree // "NAME=value" -> tree
	names   map[string]int   // marker variable names in use -> trees

	scanMu sync.Mutex // one read at a time; guards last
	envs   *envReader
	last   *tableScan

	stop chan struct{}
	done chan struct{}
}

var (
	tableMu   sync.Mutex
	tableRefs int
	tableC    *tableCore
)

// acquireTableCore starts (or joins) the process-wide core. Errors: no
// process-table reader, another owner of child reaping (a Supervisor) in
// this process, or the waiter's setup.
func acquireTableCore(log *zap.Logger, procs proctable.Reader) (*tableCore, error) {
	tableMu.Lock()
	defer tableMu.Unlock()
	if tableC != nil {
		tableRefs++
		return tableC, nil
	}
	if err := reapingOwnedElsewhere(); err != nil {
		return nil, err
	}
	if procs == nil {
		var err error
		if procs, err = proctable.New(); err != nil {
			return nil, err
		}
	}
	c := &tableCore{log: log, procs: procs, self: os.Getpid(), leaders: map[int]*Tree{},
		trees: map[*Tree]struct{}{}, markers: map[string]*Tree{}, names: map[string]int{},
		envs: newEnvReader(procs, log), stop: make(chan struct{}), done: make(chan struct{})}
	w, err := newTableWaiter(c)
	if err != nil {
		c.envs.close()
		return nil, err
	}
	c.w = w
	go c.run()
	tableC, tableRefs = c, 1
	return c, nil
}

// Left alike to reaper's releaseCentral: a different core (scanner, environment reader, waiter), its own teardown.

// releaseTableCore drops one reference; the last stops the scanner and the
// waiter (after a final reap pass).
func releaseTableCore() {
	tableMu.Lock()
	defer tableMu.Unlock()
	if tableRefs--; tableRefs > 0 {
		return
	}
	c := tableC
	tableC = nil
	close(c.stop)
	<-c.done
	c.w.close()
	c.envs.close()
}

// run re-scans every tableScanInterval while a tree is registered.
func (c *tableCore) run() {
	defer close(c.done)
	tick := time.NewTicker(tableScanInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
			c.mu.Lock()
			n := len(c.trees)
			c.mu.Unlock()
			if n > 0 {
				if _, err := c.scanAfter(time.Now()); err != nil {
					c.log.Warn("reaper: process-table scan failed", zap.Error(err))
				}
			}
		}
	}
}

// register adds a started tree (c.mu held by the caller: see startTable).
func (c *tableCore) registerLocked(t *Tree) {
	c.leaders[t.id.pid] = t
	c.trees[t] = struct{}{}
	c.markers[t.marker] = t
	c.names[t.markerName]++
}

// unregister removes a proven (or abandoned) tree.
func (c *tableCore) unregister(t *Tree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.trees[t]; !ok {
		return
	}
	delete(c.trees, t)
	if c.markers[t.marker] == t {
		delete(c.markers, t.marker)
	}
	if c.names[t.markerName]--; c.names[t.markerName] <= 0 {
		delete(c.names, t.markerName)
	}
	if c.leaders[t.id.pid] == t {
		delete(c.leaders, t.id.pid)
	}
}

// scanAfter returns a scan that began at or after `after`: the last one if
// it qualifies (another caller's, which this one waited for), else a new
// one. Errors: the table could not be read.
func (c *tableCore) scanAfter(after time.Time) (*tableScan, error) {
	c.scanMu.Lock()
	defer c.scanMu.Unlock()
	if c.last != nil && !c.last.at.Before(after) {
		return c.last, nil
	}
	at := time.Now()
	list, err := c.procs.List()
	if err != nil {
		return nil, err
	}
	s := newTableScan(at, list, c.self)
	c.mu.Lock()
	trees := make([]*Tree, 0, len(c.trees))
	for t := range c.trees {
		trees = append(trees, t)
	}
	markers := make(map[string]*Tree, len(c.markers))
	for m, t := range c.markers {
		markers[m] = t
	}
	names := make([]string, 0, len(c.names))
	for n := range c.names {
		names = append(names, n+"=")
	}
	c.mu.Unlock()
	s.marked = c.envs.marked(s, func(e string) *Tree { return markers[e] }, names, envWait)
	for _, t := range trees {
		t.update(s)
	}
	c.last = s
	return s, nil
}

// newTableScan indexes one read of the table that began at `at`, leaving
// out this process (self).
func newTableScan(at time.Time, list []proctable.Proc, self int) *tableScan {
	s := &tableScan{at: at, procs: make(map[int]proctable.Proc, len(list)), children: make(map[int][]int, len(list)),
		byPgid: map[int][]int{}}
	for _, p := range list {
		if p.Pid == self {
			continue
		}
		s.procs[p.Pid] = p
		s.children[p.PPid] = append(s.children[p.PPid], p.Pid)
		s.byPgid[p.Pgid] = append(s.byPgid[p.Pgid], p.Pid)
	}
	return s
}

// exited hands a wait status the waiter collected to its tree: the leader
// (by pid: an unreaped pid cannot be recycled), else every live tree that
// knows the process (pid and start time; start 0 = unknown), else every
// tree whose process group it was in while the group was pinned by an
// unreaped leader.
func (c *tableCore) exited(pid int, start uint64, pgid int, ws unix.WaitStatus) {
	now := time.Now()
	c.mu.Lock()
	if t := c.leaders[pid]; t != nil {
		delete(c.leaders, pid)
		c.mu.Unlock()
		t.recordExit(tableKey{pid, t.id.start}, ws, now)
		return
	}
	trees := make([]*Tree, 0, len(c.trees))
	for t := range c.trees {
		trees = append(trees, t)
	}
	c.mu.Unlock()
	k := tableKey{pid, start}
	owned := false
	for _, t := range trees {
		if t.claims(k, pgid) {
			t.recordExit(k, ws, now)
			owned = true
		}
	}
	if !owned {
		c.log.Debug("reaper: reaped a child that belongs to no process-table tree", zap.Int("pid", pid))
	}
}
