//go:build linux

package reaper

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// signalTree sends sig to every member of the tree from the sidecar's side
// (the guardian died early) and records it: the cgroup's members via pidfd
// (cgroup.kill for SIGKILL), the pinned process group, the live children
// of this process attributed to the tree, and the tracked members.
func (t *Tree) signalTree(sig unix.Signal) {
	now := time.Now()
	var errs []string
	if t.cgPath != "" {
		t.trackCgroup(now)
		if sig == unix.SIGKILL {
			if err := os.WriteFile(filepath.Join(t.cgPath, "cgroup.kill"), []byte("1"), 0); err != nil {
				errs = append(errs, "cgroup.kill: "+err.Error())
			}
		} else {
			for _, pid := range cgroupTreeProcs(t.cgPath) {
				if err := t.signalCgroupMember(pid, sig); err != nil {
					errs = append(errs, err.Error())
				}
			}
		}
	}
	errs = append(errs, t.signalGroup(sig)...)
	_, perrs := t.fallbackPass(sig)
	errs = append(errs, perrs...)
	t.mu.Lock()
	rec := SignalRecord{Signal: unix.SignalName(sig), Target: "tree", At: now}
	if len(errs) > 0 {
		rec.Error = strings.Join(errs, "; ")
	}
	t.signals = append(t.signals, rec)
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
		p, ok := readStat(t.pid)
		pinned = ok && p.start == t.start && p.ppid == t.c.self && p.state != 'Z'
	}
	if !pinned {
		return nil
	}
	if err := unix.Kill(-t.pgid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return []string{fmt.Sprintf("process group %d: %v", t.pgid, err)}
	}
	return nil
}

// signalLive sends sig (once per phase) to every live member via pidfd.
func (t *Tree) signalLive(snap snapshot, sig unix.Signal) []string {
	var errs []string
	for _, k := range t.liveMembers(snap) {
		t.mu.Lock()
		m := t.members[k]
		already := (sig == unix.SIGTERM && m.sentTerm) || (sig == unix.SIGKILL && m.sentKill)
		if sig == unix.SIGTERM {
			m.sentTerm = true
		} else if sig == unix.SIGKILL {
			m.sentKill = true
		}
		t.mu.Unlock()
		if already {
			continue
		}
		if err := t.signalMember(k, sig); err != nil {
			errs = append(errs, err.Error())
		}
	}
	return errs
}

// signalMember signals one process through a pidfd, after checking that
// the pidfd refers to the process we saw (same start time).
func (t *Tree) signalMember(k procKey, sig unix.Signal) error {
	t.mu.Lock()
	fd := t.pidfd
	t.mu.Unlock()
	if t.isLeader(k) && fd >= 0 {
		t.mu.Lock()
		var err error
		if t.pidfd >= 0 {
			err = unix.PidfdSendSignal(t.pidfd, sig, nil, 0)
		}
		t.mu.Unlock()
		if err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pid %d: %v", k.pid, err)
		}
		return nil
	}
	fd, err := unix.PidfdOpen(k.pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("pid %d: pidfd_open: %v", k.pid, err)
	}
	defer unix.Close(fd)
	if p, ok := readStat(k.pid); !ok || p.start != k.start {
		return nil // gone, or the pid was recycled
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("pid %d: %v", k.pid, err)
	}
	return nil
}

// signalCgroupMember signals a pid read from cgroup.procs through a pidfd,
// after checking that the pidfd's process is in this cgroup.
func (t *Tree) signalCgroupMember(pid int, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("pid %d: pidfd_open: %v", pid, err)
	}
	defer unix.Close(fd)
	if cg, ok := readCgroupV2(pid); !ok || !cgroupWithin(cg, t.cgRel) {
		return nil
	}
	if p, ok := readStat(pid); ok {
		t.mu.Lock()
		m := t.addMemberLocked(procKey{pid: pid, start: p.start}, RoleDescendant, time.Now())
		if sig == unix.SIGTERM {
			if m.sentTerm {
				t.mu.Unlock()
				return nil // once per process
			}
			m.sentTerm = true
		}
		t.mu.Unlock()
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("pid %d: %v", pid, err)
	}
	return nil
}
