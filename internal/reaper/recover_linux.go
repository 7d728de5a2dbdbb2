//go:build linux

package reaper

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CgroupParent is the directory provider cgroups are made in ("" when not
// in cgroup mode); the ownership ledger records it before each launch.
func (s *Supervisor) CgroupParent() string { return s.cgParent }

// Leftover identifies a provider tree that an earlier sidecar owned, as its
// ownership ledger recorded it: the leader's pid and start time (field 22
// of /proc/<pid>/stat, clock ticks; 0 when the entry was written before the
// launch), its process group, its cgroup directory (or, before the launch,
// a glob of the cgroups it may have got), and the "NAME=value" environment
// entry every process of the tree inherits.
type Leftover struct {
	Pid        int
	StartTicks uint64
	Pgid       int
	Cgroup     string
	CgroupGlob string
	Marker     string
}

// Recover kills whatever is left of a tree whose sidecar died and whose
// guardian did not finish the job (the ledger's second line of defence,
// docs/operations.md, "The ownership ledger"), within grace, and reports
// what it did:
//   - each cgroup of the tree is killed with cgroup.kill, waited for
//     (populated 0) and removed, nested cgroups first;
//   - every live process still in the leader's process group or carrying
//     the tree's environment marker is pinned with a pidfd, re-checked and
//     sent SIGKILL; passes repeat until one finds nothing (forks racing the
//     sweep are caught by the next pass).
//
// Complete means the cgroups were observed empty and no live process with
// the marker or the group is left. Processes that dropped the marker and
// left the group outside any cgroup cannot be seen; Verified.Method says
// which evidence was used.
func Recover(l Leftover, grace time.Duration) Termination {
	res := Termination{Signals: []SignalRecord{}, Processes: []ProcessRecord{}, Errors: []ErrorRecord{}}
	deadline := time.Now().Add(grace)
	cgroups := []string{}
	if l.Cgroup != "" {
		cgroups = append(cgroups, l.Cgroup)
	} else if l.CgroupGlob != "" {
		cgroups, _ = filepath.Glob(l.CgroupGlob)
	}
	var evidence []string
	cgEmpty := true
	if len(cgroups) > 0 || l.Cgroup != "" {
		res.Containment = ModeCgroup
		for _, dir := range cgroups {
			empty, killed := recoverCgroup(&res, dir, l.Pid, deadline)
			cgEmpty = cgEmpty && empty
			if killed {
				evidence = appendOnce(evidence, "cgroup.kill; cgroup.events populated 0")
			} else {
				evidence = appendOnce(evidence, "cgroup found empty (populated 0)")
			}
		}
		if len(cgroups) == 0 {
			evidence = append(evidence, "cgroup already removed")
		}
	} else {
		res.Containment = ModeProcessGroup
	}
	if l.Pgid > 0 || l.Marker != "" {
		rest := recoverByIdentity(&res, l, deadline)
		cgEmpty = cgEmpty && rest
		evidence = append(evidence, "no live process in the leader's process group (while the leader lived) or carrying the tree's environment marker (one that dropped the marker outside a cgroup cannot be seen)")
	}
	if !cgEmpty {
		evidence = []string{"leftover processes still alive after SIGKILL (" + strings.Join(evidence, "; ") + ")"}
	}
	res.Verified = Verification{TreeEmpty: cgEmpty, Method: strings.Join(evidence, "; ")}
	res.Complete = cgEmpty
	if !cgEmpty {
		res.Errors = append(res.Errors, ErrorRecord{Code: CodeKillTimeout, Message: "leftover processes did not exit after SIGKILL"})
	}
	return res
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// recoverCgroup kills one leftover cgroup and removes it (depth first).
func recoverCgroup(res *Termination, dir string, leader int, deadline time.Time) (empty, killed bool) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		removeV1Mirrors(dir) // the watchdog removed the v2 cgroup, not these
		return true, false
	}
	members := cgroupTreeProcs(dir)
	if pop, _ := cgroupPopulated(dir); pop {
		killed = true
		rec := SignalRecord{Signal: "SIGKILL", Target: "tree", At: time.Now()}
		if err := writeCgroupKill(dir); err != nil {
			rec.Error = err.Error()
			res.Errors = append(res.Errors, ErrorRecord{Code: CodeSignalFailed, Message: err.Error()})
		}
		res.Signals = append(res.Signals, rec)
	}
	empty = waitCgroupEmpty(nil, nil, nil, dir, time.Until(deadline), nil)
	for _, pid := range members {
		role := RoleDescendant
		if pid == leader {
			role = RoleProvider
		}
		res.Processes = append(res.Processes, ProcessRecord{Pid: pid, Role: role, Signal: "SIGKILL", ExitedAt: time.Now()})
	}
	if empty {
		if err := removeCgroupSubtree(dir); err != nil {
			res.Errors = append(res.Errors, ErrorRecord{Code: CodeCgroupRemove, Message: err.Error()})
		}
		removeV1Mirrors(dir) // its cgroup v1 limit dirs, if it had any

	}
	return empty, killed
}

// recoverByIdentity kills, pass after pass, every live process that is in
// the leader's process group (the leader itself only when its start time
// matches) or carries the marker; it reports whether a pass found none
// before the deadline.
func recoverByIdentity(res *Termination, l Leftover, deadline time.Time) bool {
	seen := map[procKey]bool{}
	for {
		found := 0
		for _, k := range leftoverMembers(l) {
			found++
			if seen[k] {
				continue
			}
			seen[k] = true
			role := RoleDescendant
			if k.pid == l.Pid && k.start == l.StartTicks {
				role = RoleProvider
			}
			rec := SignalRecord{Signal: "SIGKILL", Target: role, At: time.Now()}
			if err := killPinned(k, l); err != nil && !errors.Is(err, unix.ESRCH) {
				rec.Error = err.Error()
				res.Errors = append(res.Errors, ErrorRecord{Code: CodeSignalFailed, Message: "SIGKILL " + strconv.Itoa(k.pid) + ": " + err.Error()})
			}
			res.Signals = append(res.Signals, rec)
			res.Processes = append(res.Processes, ProcessRecord{Pid: k.pid, Role: role, Signal: "SIGKILL", ExitedAt: time.Now()})
		}
		if found == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // processes we cannot wait for: bounded re-scan of /proc
	}
}

// leftoverMembers lists live processes belonging to l by group or marker.
//
// The group is used only while its leader (pid and start time) is alive:
// that pins the group id, which could otherwise have been recycled by an
// unrelated group (docs/rules.md#r22). Without the leader, only the marker
// identifies the tree.
func leftoverMembers(l Leftover) []procKey {
	if l.Pid > 0 {
		if info, ok := readStat(l.Pid); !ok || info.state == 'Z' || info.start != l.StartTicks {
			l.Pgid = 0
		}
	}
	var out []procKey
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		info, ok := readStat(pid)
		if !ok || info.state == 'Z' {
			continue
		}
		if belongs(pid, info, l) {
			out = append(out, procKey{pid, info.start})
		}
	}
	return out
}

func belongs(pid int, info procInfo, l Leftover) bool {
	if l.Pgid > 0 && info.pgid == l.Pgid && (pid != l.Pid || info.start == l.StartTicks) {
		return true
	}
	if l.Marker == "" {
		return false
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+l.Marker+"\x00"))
}

// killPinned sends SIGKILL to k through signalPinned, re-checking that it
// still belongs to l; unix.ESRCH if it was gone or no longer belongs.
func killPinned(k procKey, l Leftover) error {
	sent, err := signalPinned(k, unix.SIGKILL, func(pid int, info procInfo) bool {
		return belongs(pid, info, l) || belongs(pid, info, Leftover{Marker: l.Marker})
	})
	if err == nil && !sent {
		return unix.ESRCH
	}
	return err
}
