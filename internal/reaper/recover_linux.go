//go:build linux

package reaper

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// CgroupParent is the directory provider cgroups are made in ("" when not
// in cgroup mode); the ownership ledger records it before each launch.
func (s *Supervisor) CgroupParent() string { return s.cgParent }

// Recover kills whatever is left of a tree whose sidecar died and whose
// guardian or watchdog did not finish the job (the ledger's second line of
// defence), within grace, and reports what it did. It kills only what it
// can prove is the tree's:
//   - a process is the tree's when its environment carries MarkerEnv with a
//     value whose MarkerDigest is the entry's (the token is unguessable; an
//     agent can give it only to processes it starts itself); it is pinned
//     with a pidfd, re-checked and SIGKILLed, pass after pass until a pass
//     finds none (forks racing the sweep are caught by the next pass); the
//     entry's pid is the provider only when its start time matches too;
//   - a cgroup the entry names is used only when it lies in a directory a
//     sidecar makes (<cgroup2 mount>/acpx-sidecar-<the dead owner's pid>,
//     or this sidecar's configured parent) under the session's own name
//     (acpx-<session>-<n>), and, when populated, only when a process in it
//     carries the tree's marker: then it is killed whole with cgroup.kill
//     (descendants that dropped the marker included), waited for and
//     removed;
//   - never a process group, a cgroup outside those directories, or a
//     process by the entry's word alone.
//
// A cgroup the entry names elsewhere is not used (Verified.Method says
// so); an entry whose pid is alive with its start time but does not carry
// the marker is a forgery as far as recovery can tell: ErrUnprovable,
// nothing done. Complete means no process carrying the marker is left and
// every cgroup used was observed empty. Errors: ErrUnprovable (nothing was
// done).
func Recover(l Leftover, grace time.Duration) (Termination, error) {
	res := Termination{Signals: []SignalRecord{}, Processes: []ProcessRecord{}, Errors: []ErrorRecord{}}
	if len(l.MarkerSHA256) != sha256.Size*2 || !IsSessionID(l.Session) {
		return res, fmt.Errorf("%w: no marker digest or a malformed session id", ErrUnprovable)
	}
	cgroups, note := trustedCgroups(l)
	if l.Pid > 0 {
		if info, ok := readStat(l.Pid); ok && info.state != 'Z' && info.start == l.StartTicks && !carriesMarker(l.Pid, l.MarkerSHA256) {
			return res, fmt.Errorf("%w: its pid %d is alive with its start time but does not carry the tree's marker", ErrUnprovable, l.Pid)
		}
	}
	deadline := time.Now().Add(grace)
	var evidence []string
	if note != "" {
		evidence = append(evidence, note)
	}
	cgEmpty := true
	if l.Cgroup != "" || l.CgroupParent != "" {
		res.Containment = ModeCgroup
	} else {
		res.Containment = ModeProcessGroup
	}
	for _, dir := range cgroups {
		empty, how := recoverCgroup(&res, dir, l, deadline)
		cgEmpty = cgEmpty && empty
		evidence = appendOnce(evidence, how)
	}
	rest := recoverByMarker(&res, l, deadline)
	evidence = append(evidence, "no live process carrying the tree's environment marker (one that dropped it outside a cgroup cannot be seen)")
	done := cgEmpty && rest
	if !done {
		evidence = []string{"leftover processes still alive after SIGKILL (" + strings.Join(evidence, "; ") + ")"}
		res.Errors = append(res.Errors, ErrorRecord{Code: CodeKillTimeout, Message: "leftover processes did not exit after SIGKILL"})
	}
	res.Verified = Verification{TreeEmpty: done, Method: strings.Join(evidence, "; ")}
	res.Complete = done
	return res, nil
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// trustedCgroups returns the cgroups of l that lie where a sidecar makes
// them (see Recover); note says why none is used.
func trustedCgroups(l Leftover) (dirs []string, note string) {
	if l.Cgroup == "" && l.CgroupParent == "" {
		return nil, ""
	}
	mount, err := cgroup.Mount()
	if err != nil {
		return nil, "the cgroup named by the ledger entry was not used: no writable cgroup2 mount"
	}
	parents := map[string]bool{}
	if l.SidecarPid > 0 {
		parents[filepath.Join(mount, "acpx-sidecar-"+strconv.Itoa(l.SidecarPid))] = true
	}
	if own := filepath.Clean(l.OwnParent); l.OwnParent != "" && own != filepath.Join(mount, "acpx-sidecar-"+strconv.Itoa(os.Getpid())) {
		parents[own] = true // a configured parent (the default is this sidecar's own: never a dead one's)
	}
	name := regexp.MustCompile(`^acpx-` + regexp.QuoteMeta(l.Session) + `-[0-9]+$`)
	const elsewhere = "the cgroup named by the ledger entry was not used: it is not a directory a sidecar makes for that session"
	if l.Cgroup != "" {
		dir := filepath.Clean(l.Cgroup)
		if !parents[filepath.Dir(dir)] || !name.MatchString(filepath.Base(dir)) {
			return nil, elsewhere
		}
		return []string{dir}, ""
	}
	parent := filepath.Clean(l.CgroupParent)
	if !parents[parent] {
		return nil, elsewhere
	}
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if e.IsDir() && name.MatchString(e.Name()) {
			dirs = append(dirs, filepath.Join(parent, e.Name()))
		}
	}
	if len(dirs) == 0 {
		return nil, "cgroup already removed"
	}
	return dirs, ""
}

// recoverCgroup kills one trusted leftover cgroup — when populated, only
// if a process in it carries the tree's marker — and removes it (depth
// first). It reports whether it is gone or empty, and how.
func recoverCgroup(res *Termination, dir string, l Leftover, deadline time.Time) (empty bool, how string) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		cgroup.RemoveV1Mirrors(dir) // the watchdog removed the v2 cgroup, not these
		return true, "cgroup already removed"
	}
	members := cgroup.TreeProcs(dir)
	how = "cgroup found empty (populated 0)"
	if pop, _ := cgroup.Populated(dir); pop {
		proven := false
		for _, pid := range members {
			proven = proven || carriesMarker(pid, l.MarkerSHA256)
		}
		if !proven {
			// Not the tree's as far as anything shows: its processes are
			// left alone (the marker pass below still kills the tree's).
			return true, "cgroup " + filepath.Base(dir) + " not killed: no process in it carries the tree's marker"
		}
		how = "cgroup.kill; cgroup.events populated 0"
		rec := SignalRecord{Signal: "SIGKILL", Target: "tree", At: time.Now()}
		if err := cgroup.WriteKill(dir); err != nil {
			rec.Error = err.Error()
			res.Errors = append(res.Errors, ErrorRecord{Code: CodeSignalFailed, Message: err.Error()})
		}
		res.Signals = append(res.Signals, rec)
	}
	empty = cgroup.WaitEmpty(nil, nil, nil, dir, time.Until(deadline), nil)
	for _, pid := range members {
		role := RoleDescendant
		if pid == l.Pid {
			role = RoleProvider
		}
		res.Processes = append(res.Processes, ProcessRecord{Pid: pid, Role: role, Signal: "SIGKILL", ExitedAt: time.Now()})
	}
	if empty {
		if err := cgroup.RemoveSubtree(dir); err != nil {
			res.Errors = append(res.Errors, ErrorRecord{Code: CodeCgroupRemove, Message: err.Error()})
		}
		cgroup.RemoveV1Mirrors(dir) // its cgroup v1 limit dirs, if it had any
	}
	return empty, how
}

// recoverByMarker kills, pass after pass, every live process carrying the
// tree's marker; it reports whether a pass found none before the deadline.
func recoverByMarker(res *Termination, l Leftover, deadline time.Time) bool {
	seen := map[procKey]bool{}
	named := map[int]bool{}
	for _, p := range res.Processes {
		named[p.Pid] = true
	}
	for {
		found := 0
		for _, k := range markedProcs(l.MarkerSHA256) {
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
			sent, err := signalPinned(k, unix.SIGKILL, func(pid int, _ procInfo) bool { return carriesMarker(pid, l.MarkerSHA256) })
			if err != nil && !errors.Is(err, unix.ESRCH) {
				rec.Error = err.Error()
				res.Errors = append(res.Errors, ErrorRecord{Code: CodeSignalFailed, Message: "SIGKILL " + strconv.Itoa(k.pid) + ": " + err.Error()})
			}
			if sent || rec.Error != "" {
				res.Signals = append(res.Signals, rec)
			}
			if !named[k.pid] {
				named[k.pid] = true
				res.Processes = append(res.Processes, ProcessRecord{Pid: k.pid, Role: role, Signal: "SIGKILL", ExitedAt: time.Now()})
			}
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

// markedProcs lists the live processes (zombies excluded, this one too)
// carrying the marker whose digest is digest.
func markedProcs(digest string) []procKey {
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
		if carriesMarker(pid, digest) {
			out = append(out, procKey{pid, info.start})
		}
	}
	return out
}

// carriesMarker reports whether pid's environment has a MarkerEnv entry
// whose MarkerDigest is digest.
func carriesMarker(pid int, digest string) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	prefix := []byte(MarkerEnv + "=")
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.HasPrefix(kv, prefix) && MarkerDigest(string(kv)) == digest {
			return true
		}
	}
	return false
}
