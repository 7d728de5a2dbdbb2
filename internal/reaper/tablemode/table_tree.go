//go:build linux || darwin

package tablemode

import (
	"io"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
)

// Tree is one provider launched under reaper.ModeProcessTable and every
// process the process table attributes to it (Tree.update). All methods
// are safe for concurrent use. It satisfies the same interface as
// *reaper.Tree (internal/launch's Tree, the one seam both modes are
// used through).
type Tree struct {
	s     *Supervisor
	c     *tableCore
	procs proctable.Reader

	id         treeID
	marker     string // "NAME=value" in the environment of the tree
	markerName string // NAME

	stdio reaper.Stdio // the parent's ends of the provider's pipes

	exited chan struct{}
	termMu sync.Mutex // serializes Terminate

	mu           sync.Mutex
	leaderReaped bool
	status       reaper.ExitStatus
	members      map[tableKey]*tableMember
	order        []*tableMember
	proof        treeProof // under mu
}

// treeID is the identity of a tree's leader (reaper.TreeInfo's facts).
type treeID struct {
	pid, pgid int
	start     uint64 // leader start time (proctable.Proc.Start)
	startedAt time.Time
}

// treeProof is what the Terminate calls on a tree recorded, cumulative
// over every call (the Termination's signals, errors and verification),
// and whether the tree was proven empty.
type treeProof struct {
	signals  []reaper.SignalRecord
	errors   []reaper.ErrorRecord
	verified reaper.Verification
	proven   bool
}

// tableMember is one process ever attributed to the tree.
type tableMember struct {
	key    tableKey
	role   string
	seen   time.Time // when the read that first found it began
	dead   bool      // observed gone or a zombie
	reaped bool      // its wait status was collected here
	code   *int
	sig    string // from its wait status
	sent   string // the last signal the sidecar sent it
	term   bool   // SIGTERM sent (once per process)
	kill   bool   // SIGKILL sent (once per process)
	at     time.Time
}

// Left alike to reaper.Tree's accessors: each is a one-line read of this Tree's own fields (id, stdio).

// Info is the tree's identity (TreeInfo; no cgroup in this mode).
func (t *Tree) Info() reaper.TreeInfo {
	return reaper.TreeInfo{Pid: t.id.pid, Pgid: t.id.pgid, StartTicks: t.id.start, StartedAt: t.id.startedAt, Containment: reaper.ModeProcessTable}
}

// Stdio is the provider's pipes (Stdio).
func (t *Tree) Stdio() reaper.Stdio { return t.stdio }

// Stdin is the write end of the provider's stdin pipe (caller closes it).
func (t *Tree) Stdin() io.WriteCloser { return t.stdio.Stdin }

// Stdout is the read end of the provider's stdout pipe.
func (t *Tree) Stdout() io.ReadCloser { return t.stdio.Stdout }

// Stderr is the read end of the provider's stderr pipe.
func (t *Tree) Stderr() io.ReadCloser { return t.stdio.Stderr }

// Pid is the provider (leader) pid.
func (t *Tree) Pid() int { return t.id.pid }

// Pgid is the provider's process group (its own: the leader's pid).
func (t *Tree) Pgid() int { return t.id.pgid }

// StartTicks is the leader's start time as the process table gives it
// (proctable.Proc.Start: clock ticks since boot on Linux, microseconds
// since the epoch on Darwin), kept in the ownership ledger against pid
// reuse.
func (t *Tree) StartTicks() uint64 { return t.id.start }

// StartedAt is when the provider was started.
func (t *Tree) StartedAt() time.Time { return t.id.startedAt }

// Containment is reaper.ModeProcessTable.
func (t *Tree) Containment() reaper.Mode { return reaper.ModeProcessTable }

// CgroupPath is "": this mode has no cgroup.
func (t *Tree) CgroupPath() string { return "" }

// Exited is closed once the leader has been reaped.
func (t *Tree) Exited() <-chan struct{} { return t.exited }

// ExitStatus is the leader's wait status, valid after Exited.
func (t *Tree) ExitStatus() reaper.ExitStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

// Resources fails with reaper.ErrUnsupported: without a cgroup there are no
// counters (docs/protocol.md §18.2).
func (t *Tree) Resources() (reaper.Resources, error) {
	return reaper.Resources{}, reaper.ErrUnsupported
}

// update brings the member set up to date from one read of the table:
//   - a member is live while a process with its pid and start time is in
//     the table and not a zombie; one absent from a read that began after
//     it was found is gone;
//   - the provider's process group: every process in it, while the group
//     id is pinned — the leader is unreaped (this process's child: its id
//     cannot be reused) or a live member is in the group (a group id is
//     not reused while the group has a member);
//   - every process carrying the tree's marker entry (s.marked);
//   - every descendant of a live member by parent chain, a child counting
//     only if it started no earlier than its parent (so a recycled parent
//     pid adopts nothing).
func (t *Tree) update(s *tableScan) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.proof.proven {
		return
	}
	now := time.Now()
	live := map[int]bool{}
	pinned := !t.leaderReaped
	for k, m := range t.members {
		if m.dead {
			continue
		}
		p, ok := s.procs[k.pid]
		switch {
		case ok && p.Start == k.start && !p.Zombie:
			live[k.pid] = true
			pinned = pinned || p.Pgid == t.id.pgid
		case ok && p.Start == k.start, m.seen.Before(s.at):
			m.dead, m.at = true, now
		}
	}
	if pinned && t.id.pgid > 0 {
		for _, pid := range s.byPgid[t.id.pgid] {
			if !s.procs[pid].Zombie {
				live[pid] = true
			}
		}
	}
	for _, pid := range s.marked[t] {
		live[pid] = true
	}
	queue := make([]int, 0, len(live))
	for pid := range live {
		queue = append(queue, pid)
	}
	var zombies []int
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		parent := s.procs[pid]
		for _, ch := range s.children[pid] {
			p := s.procs[ch]
			if live[ch] || p.Start < parent.Start {
				continue
			}
			if p.Zombie {
				zombies = append(zombies, ch)
				continue
			}
			live[ch] = true
			queue = append(queue, ch)
		}
	}
	for pid := range live {
		t.addLocked(tableKey{pid, s.procs[pid].Start}, s.at)
	}
	for _, pid := range zombies {
		if m := t.addLocked(tableKey{pid, s.procs[pid].Start}, s.at); !m.dead {
			m.dead, m.at = true, now
		}
	}
}

// addLocked returns the member k, adding it (t.mu held).
func (t *Tree) addLocked(k tableKey, seen time.Time) *tableMember {
	if m := t.members[k]; m != nil {
		return m
	}
	role := reaper.RoleDescendant
	if k.pid == t.id.pid && k.start == t.id.start {
		role = reaper.RoleProvider
	}
	m := &tableMember{key: k, role: role, seen: seen}
	t.members[k] = m
	t.order = append(t.order, m)
	return m
}

// claims reports whether a reaped child that is not the leader belongs to
// this tree: a member by pid and start time (start 0: by pid among
// members not yet gone), or a process of the group while the leader is
// unreaped.
func (t *Tree) claims(k tableKey, pgid int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.proof.proven {
		return false
	}
	if k.start != 0 {
		if t.members[k] != nil {
			return true
		}
	} else {
		for mk, m := range t.members {
			if mk.pid == k.pid && !m.reaped {
				return true
			}
		}
	}
	return pgid == t.id.pgid && pgid > 0 && !t.leaderReaped
}

// recordExit stores a wait status collected by the waiter; the leader's
// closes Exited.
func (t *Tree) recordExit(k tableKey, ws unix.WaitStatus, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var m *tableMember
	if k.start == 0 {
		for mk, mm := range t.members {
			if mk.pid == k.pid && !mm.reaped {
				m = mm
			}
		}
	}
	if m == nil {
		m = t.addLocked(k, now)
	}
	m.reaped, m.dead, m.at = true, true, now
	// Left alike to reaper.Tree.recordExit: this mode's own member and status, set field by field as there.
	if ws.Signaled() {
		m.sig = unix.SignalName(ws.Signal())
	} else {
		c := ws.ExitStatus()
		m.code = &c
	}
	if m.role == reaper.RoleProvider && !t.leaderReaped {
		t.leaderReaped = true
		t.status = reaper.ExitStatus{Code: m.code, Signal: m.sig, At: now}
		close(t.exited)
	}
}

// liveLocked lists the members live in s: present with their start time
// and not zombies, or found after s began (unknown to s, so counted live).
func (t *Tree) liveLocked(s *tableScan) []tableKey {
	var out []tableKey
	for k, m := range t.members {
		if m.dead {
			continue
		}
		p, ok := s.procs[k.pid]
		if ok && p.Start == k.start && !p.Zombie || !ok && !m.seen.Before(s.at) {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// resultLocked is the cumulative Termination (t.mu held). A process this
// sidecar did not reap (its parent, init or launchd did) is listed with
// reapedBy "parent" and the last signal the sidecar sent it, if any.
func (t *Tree) resultLocked() reaper.Termination {
	r := reaper.Termination{Signals: append([]reaper.SignalRecord{}, t.proof.signals...), Containment: reaper.ModeProcessTable,
		Verified: t.proof.verified, Complete: t.proof.proven, Errors: append([]reaper.ErrorRecord(nil), t.proof.errors...)}
	procs := make([]reaper.ProcessRecord, 0, len(t.order))
	for _, m := range t.order {
		if !m.dead {
			continue
		}
		sig := m.sig
		if !m.reaped {
			sig = m.sent
		}
		pr := reaper.ProcessRecord{Pid: m.key.pid, Role: m.role, ExitCode: m.code, Signal: sig, ExitedAt: m.at, Reaped: m.reaped}
		if !m.reaped {
			pr.ReapedBy = reaper.ReapedByParent // its parent (init or launchd, once orphaned) collected its status
		}
		procs = append(procs, pr)
	}
	sort.SliceStable(procs, func(i, j int) bool {
		return procs[i].Role == reaper.RoleProvider && procs[j].Role != reaper.RoleProvider
	})
	r.Processes = procs
	return r
}
