//go:build linux

package reaper

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// Tree is one launched provider and every process it spawns. All methods
// are safe for concurrent use. Its fields are grouped by job: the
// leader's identity (id), the tree's cgroups (cg), the guardian and the
// PID-namespace init it talks to, the provider's pipes (stdio), the
// leader's exit, the members seen, and what Terminate recorded (proof).
type Tree struct {
	s    *Supervisor
	c    *central
	mode Mode

	id treeID
	cg treeCgroup
	g  *guardianConn
	// initCtl is the tree's PID-namespace init's control socket
	// (sandbox_linux.go), nil without one; closed with the tree's other
	// descriptors once it is proven gone. Under mu.
	initCtl *sandbox.InitConn

	stdio Stdio // the parent's ends of the provider's pipes

	exited chan struct{}
	termMu sync.Mutex // serializes Terminate
	// terminating: Terminate was called. A direct cgroup tree claims the
	// unattributable children of this process (see ownersLocked) only then.
	terminating atomic.Bool

	mu           sync.Mutex
	pidfd        int // leader pidfd from fork; -1 once closed
	leaderReaped bool
	status       ExitStatus
	members      map[procKey]*member
	order        []*member
	proof        treeProof // under mu
}

// treeID is the identity of a tree's leader (TreeInfo's facts).
type treeID struct {
	pid, pgid int
	start     uint64 // leader start time (/proc/<pid>/stat field 22)
	startedAt time.Time
}

// treeCgroup is a tree's cgroups; zero outside cgroup mode.
type treeCgroup struct {
	path string // absolute cgroup dir, "" if none
	rel  string // the same as shown in /proc/<pid>/cgroup
	// v1 maps a controller to the tree's cgroup v1 limit directory
	// (cgroup.MakeV1Limits); nil unless limits are enforced in v1.
	v1 map[string]string
}

// treeProof is what the Terminate calls on a tree recorded, cumulative
// over every call (the Termination's signals, errors and verification),
// and whether the tree was proven empty.
type treeProof struct {
	signals  []SignalRecord
	errors   []ErrorRecord
	verified Verification
	proven   bool
}

// member is one process ever seen in the tree.
type member struct {
	key      procKey
	role     string
	seen     time.Time // first seen; a snapshot older than this says nothing
	reaped   bool      // wait status collected here
	gone     bool      // observed gone (reaped by its own parent)
	code     *int
	sig      string
	at       time.Time
	sentTerm bool
	sentKill bool
	// outside is the cgroup the guardian found this process in when it
	// was outside the provider's cgroup ("" otherwise or unknown).
	outside string
}

// Info is the tree's identity (TreeInfo).
func (t *Tree) Info() TreeInfo {
	return TreeInfo{Pid: t.id.pid, Pgid: t.id.pgid, StartTicks: t.id.start, StartedAt: t.id.startedAt, Containment: t.mode, CgroupPath: t.cg.path}
}

// Stdio is the provider's pipes (Stdio).
func (t *Tree) Stdio() Stdio { return t.stdio }

// Stdin is the write end of the provider's stdin pipe (caller closes it).
func (t *Tree) Stdin() io.WriteCloser { return t.stdio.Stdin }

// Stdout is the read end of the provider's stdout pipe (caller closes it).
// Descendants inherit the pipe, so EOF may come only after the whole tree
// is gone.
func (t *Tree) Stdout() io.ReadCloser { return t.stdio.Stdout }

// Stderr is the read end of the provider's stderr pipe (caller closes it).
func (t *Tree) Stderr() io.ReadCloser { return t.stdio.Stderr }

// Pid is the provider (leader) pid.
func (t *Tree) Pid() int { return t.id.pid }

// Pgid is the provider's process group id (== Pid; Setpgid at fork).
func (t *Tree) Pgid() int { return t.id.pgid }

// StartTicks is the leader's start time in clock ticks since boot
// (/proc/<pid>/stat field 22), its identity for the ownership ledger.
func (t *Tree) StartTicks() uint64 { return t.id.start }

// StartedAt is when the provider was started (wall clock).
func (t *Tree) StartedAt() time.Time { return t.id.startedAt }

// Containment is the mode this tree is contained by.
func (t *Tree) Containment() Mode { return t.mode }

// CgroupPath is the tree's cgroup directory, "" if none (or after
// Terminate removed it, the path it had).
func (t *Tree) CgroupPath() string { return t.cg.path }

// Exited is closed once the provider (leader) process has been reaped.
func (t *Tree) Exited() <-chan struct{} { return t.exited }

// ExitStatus is the leader's wait status; valid after Exited is closed.
func (t *Tree) ExitStatus() ExitStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

func (t *Tree) isLeader(k procKey) bool { return k.pid == t.id.pid && k.start == t.id.start }

func (t *Tree) hasMember(k procKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.members[k]
	return ok
}

func (t *Tree) addMember(k procKey, now time.Time) *member {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.addMemberLocked(k, RoleDescendant, now)
}

func (t *Tree) addMemberLocked(k procKey, role string, now time.Time) *member {
	if m, ok := t.members[k]; ok {
		return m
	}
	if t.isLeader(k) {
		role = RoleProvider
	}
	m := &member{key: k, role: role, seen: now}
	t.members[k] = m
	t.order = append(t.order, m)
	return m
}

// recordExit stores a wait status collected by the central reaper.
func (t *Tree) recordExit(k procKey, ws unix.WaitStatus, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.addMemberLocked(k, RoleDescendant, now)
	m.reaped, m.gone, m.at = true, true, now
	if ws.Signaled() {
		m.sig = unix.SignalName(ws.Signal())
	} else {
		c := ws.ExitStatus()
		m.code = &c
	}
	if m.role == RoleProvider && !t.leaderReaped {
		t.leaderReaped = true
		t.status = ExitStatus{Code: m.code, Signal: m.sig, At: now}
		close(t.exited)
	}
}

// closeInitCtlLocked closes the init's control pipe (t.mu held).
func (t *Tree) closeInitCtlLocked() {
	if t.initCtl != nil {
		t.initCtl.Close()
		t.initCtl = nil
	}
}

// track updates the member set of a tree without a cgroup from a /proc
// snapshot: members still alive (same start time), the process group while
// the leader is unreaped (pinned), and every descendant by ppid.
func (t *Tree) track(snap snapshot) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.proof.proven {
		return
	}
	set := map[int]bool{}
	for k, m := range t.members {
		if m.gone {
			continue
		}
		if p, ok := snap.procs[k.pid]; ok && p.start == k.start {
			set[k.pid] = true
		} else if !m.reaped && m.seen.Before(snap.at) {
			m.gone, m.at = true, now
		}
	}
	if !t.leaderReaped { // the snapshot was taken before this check: pgid pinned
		for pid, p := range snap.procs {
			if p.pgid == t.id.pgid {
				set[pid] = true
			}
		}
	}
	children := map[int][]int{}
	for pid, p := range snap.procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	queue := make([]int, 0, len(set))
	for pid := range set {
		queue = append(queue, pid)
	}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, ch := range children[pid] {
			if !set[ch] {
				set[ch] = true
				queue = append(queue, ch)
			}
		}
	}
	for pid := range set {
		t.addMemberLocked(procKey{pid: pid, start: snap.procs[pid].start}, RoleDescendant, now)
	}
}

// trackCgroup records the current members of the tree's cgroup and of
// every cgroup below it.
func (t *Tree) trackCgroup(now time.Time) {
	for _, pid := range cgroup.TreeProcs(t.cg.path) {
		p, ok := readStat(pid)
		if !ok {
			continue
		}
		t.mu.Lock()
		t.addMemberLocked(procKey{pid: pid, start: p.start}, RoleDescendant, now)
		t.mu.Unlock()
	}
}

// liveMembers returns the members alive (not zombie) in snap, and members
// first seen after snap was taken (unknown, so counted as alive).
func (t *Tree) liveMembers(snap snapshot) []procKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []procKey
	for k, m := range t.members {
		if m.gone || m.reaped {
			continue
		}
		p, ok := snap.procs[k.pid]
		if ok && p.start == k.start && p.state != 'Z' || !ok && !m.seen.Before(snap.at) {
			out = append(out, k)
		}
	}
	return out
}

// liveMembersStat is liveMembers without a snapshot: each tracked member's
// /proc stat is read (a direct cgroup tree tracks a few processes; a full
// /proc scan per close would cost O(every process) at a burst of closes).
func (t *Tree) liveMembersStat() []procKey {
	t.mu.Lock()
	var keys []procKey
	for k, m := range t.members {
		if !m.gone && !m.reaped {
			keys = append(keys, k)
		}
	}
	t.mu.Unlock()
	var out []procKey
	for _, k := range keys {
		if p, ok := readStat(k.pid); ok && p.start == k.start && p.state != 'Z' {
			out = append(out, k)
		}
	}
	return out
}
