//go:build linux

package reaper

// The sidecar-side kill algorithm, the one used for every tree the sidecar
// contains itself: every ModeCgroup tree (there is no guardian), and a
// subreaper / process-group tree whose guardian died before reporting it
// empty. One step (signalTree) reaches, each through signalPinned or the
// kernel:
//
//   - the cgroup's members and those of every cgroup below it (SIGTERM via
//     pidfd, once per process; SIGKILL via cgroup.kill);
//   - the provider's process group, only while the leader is unreaped and
//     our child (its id pinned, docs/rules.md#r22);
//   - the live children of this process attributed to the tree
//     (central.sweepChildren): orphans, including processes that moved
//     themselves out of the cgroup (a root provider can), re-parent here;
//   - the tracked members still alive.
//
// A tree is empty when two consecutive passes (sidecarPass), a reap cycle
// apart, find nothing live — for a cgroup tree after cgroup.events said
// "populated 0" (an event, cgroup.Watcher), so a burst of closes costs no
// polling.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// signalTree sends sig to every member of the tree from the sidecar's side
// and records the step (SignalRecord, CodeSignalFailed per failure).
func (t *Tree) signalTree(sig unix.Signal) {
	now := time.Now()
	var errs []string
	if t.cg.path != "" {
		if sig == unix.SIGKILL {
			t.trackCgroup(now)
			if err := cgroup.WriteKill(t.cg.path); err != nil {
				errs = append(errs, err.Error())
			}
		} else {
			errs = append(errs, t.signalCgroupMembers(sig)...)
		}
	}
	errs = append(errs, t.signalGroup(sig)...)
	_, perrs := t.sidecarPass(sig)
	errs = append(errs, perrs...)
	t.mu.Lock()
	rec := SignalRecord{Signal: unix.SignalName(sig), Target: "tree", At: now}
	if len(errs) > 0 {
		rec.Error = strings.Join(errs, "; ")
	}
	t.proof.signals = append(t.proof.signals, rec)
	t.mu.Unlock()
	t.recordSignalErrors(sig, errs)
}

// signalGroup signals the process group only while the leader is unreaped,
// holding the reap lock so it cannot be reaped meanwhile (docs/rules.md#r22).
func (t *Tree) signalGroup(sig unix.Signal) []string {
	t.c.reapMu.Lock()
	defer t.c.reapMu.Unlock()
	t.mu.Lock()
	pinned := !t.leaderReaped
	t.mu.Unlock()
	if pinned && t.g != nil {
		// Behind a guardian the leader is pinned here only if it became
		// our child (the guardian died): we hold reapMu, so it stays
		// unreaped while we signal.
		p, ok := readStat(t.id.pid)
		pinned = ok && p.start == t.id.start && p.ppid == t.c.self && p.state != 'Z'
	}
	if !pinned {
		return nil
	}
	if err := unix.Kill(-t.id.pgid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return []string{fmt.Sprintf("process group %d: %v", t.id.pgid, err)}
	}
	return nil
}

// signalCgroupMembers records every live member of the cgroup subtree and
// sends it sig through a pidfd re-checked to be in the cgroup; SIGTERM once
// per process.
func (t *Tree) signalCgroupMembers(sig unix.Signal) []string {
	var errs []string
	belongs := inCgroup(t.cg.rel)
	for _, pid := range cgroup.TreeProcs(t.cg.path) {
		p, ok := readStat(pid)
		if !ok {
			continue
		}
		k := procKey{pid: pid, start: p.start}
		if !t.claimSignal(k, sig, RoleDescendant) {
			continue
		}
		if t.isLeader(k) {
			if err := t.signalMember(k, sig); err != nil {
				errs = append(errs, err.Error())
			}
			continue
		}
		if _, err := signalPinned(k, sig, belongs); err != nil {
			errs = append(errs, err.Error())
		}
	}
	return errs
}

// claimSignal records k as a member and reports whether sig is still to be
// sent to it: SIGTERM and SIGKILL at most once each per process.
func (t *Tree) claimSignal(k procKey, sig unix.Signal, role string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.addMemberLocked(k, role, time.Now())
	send := true
	switch sig {
	case unix.SIGTERM:
		send, m.sentTerm = !m.sentTerm, true
	case unix.SIGKILL:
		send, m.sentKill = !m.sentKill, true
	}
	return send
}

// signalLive sends sig (once per phase) to every live member in live.
func (t *Tree) signalLive(live []procKey, sig unix.Signal) []string {
	var errs []string
	for _, k := range live {
		if !t.claimSignal(k, sig, RoleDescendant) {
			continue
		}
		if err := t.signalMember(k, sig); err != nil {
			errs = append(errs, err.Error())
		}
	}
	return errs
}

// signalMember signals one process: the leader through its pidfd from
// fork (direct trees), any other through signalPinned.
func (t *Tree) signalMember(k procKey, sig unix.Signal) error {
	if t.isLeader(k) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.pidfd >= 0 {
			if err := unix.PidfdSendSignal(t.pidfd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("pid %d: %v", k.pid, err)
			}
			return nil
		}
	}
	_, err := signalPinned(k, sig, nil)
	return err
}

// sidecarPass checks (and, if sig is not 0, signals) the tree once from
// the sidecar's side: the live children of this process attributed to it
// (central.sweepChildren), the cgroup (populated, members), and the
// tracked members (a direct cgroup tree: each member's /proc stat; a tree
// whose guardian died: a /proc snapshot, which also finds descendants by
// ppid). It reports whether none of them showed a live process, and the
// delivery errors.
func (t *Tree) sidecarPass(sig unix.Signal) (bool, []string) {
	n, errs := t.c.sweepChildren(t, sig)
	clean := n == 0
	if t.cg.path != "" {
		t.trackCgroup(time.Now())
		if !t.cgroupEmpty() {
			clean = false
		}
	}
	var live []procKey
	if t.g == nil {
		live = t.liveMembersStat()
	} else {
		snap := scanProcs()
		t.c.adoptOrphans(snap)
		t.track(snap)
		live = t.liveMembers(snap)
	}
	if len(live) > 0 {
		clean = false
	}
	if sig != 0 {
		errs = append(errs, t.signalLive(live, sig)...)
	}
	return clean, errs
}

// recordSignalErrors appends one CodeSignalFailed error per delivery error.
func (t *Tree) recordSignalErrors(sig unix.Signal, errs []string) {
	if len(errs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.proof.errors = append(t.proof.errors, SignalFailedRecords(sig, errs)...)
}

// sidecarEmpty is the sidecar-side verification: two consecutive clean
// sidecarPasses with a reap pass between them (so a child that was
// exiting during the first pass is collected, and one re-parented to us
// meanwhile is seen by the second).
func (t *Tree) sidecarEmpty(sig unix.Signal) bool {
	clean, errs := t.sidecarPass(sig)
	t.recordSignalErrors(sig, errs)
	if !clean {
		return false
	}
	t.c.reapPass()
	clean, errs = t.sidecarPass(sig)
	t.recordSignalErrors(sig, errs)
	return clean
}

// waitEmpty waits up to d for the tree to be observed empty by
// sidecarEmpty: first, for a cgroup tree, for cgroup.events "populated 0"
// (woken by the shared inotify watcher; newcomers in the cgroup get sig,
// once each); processes that appear meanwhile elsewhere are recorded and
// signalled with sig (once each).
func (t *Tree) waitEmpty(done <-chan struct{}, d time.Duration, sig unix.Signal) bool {
	deadline := time.Now().Add(d)
	tick := func() { t.trackCgroup(time.Now()) }
	if sig == unix.SIGTERM {
		tick = func() { t.recordSignalErrors(sig, t.signalCgroupMembers(sig)) }
	}
	for {
		if t.cg.path != "" && !t.cgroupEmpty() {
			cgroup.WaitEmpty(t.c.watch, done, t.exited, t.cg.path, time.Until(deadline), tick)
		}
		if t.sidecarEmpty(sig) {
			return true
		}
		rem := time.Until(deadline)
		if rem <= 0 || isDone(done) {
			return false
		}
		sleepOrDone(done, min(rem, 2*time.Millisecond))
	}
}
