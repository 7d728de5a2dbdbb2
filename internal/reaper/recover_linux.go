//go:build linux

package reaper

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Leftover identifies a provider tree that an earlier sidecar owned, as its
// ownership ledger recorded it: the leader's pid and start time (field 22
// of /proc/<pid>/stat, clock ticks), its process group and its cgroup
// directory ("" when it had none).
type Leftover struct {
	Pid        int
	StartTicks uint64
	Pgid       int
	Cgroup     string
}

// Recover kills whatever is left of a tree whose sidecar died and whose
// guardian did not finish the job (the ledger's second line of defence,
// issue 4), within grace, and reports what it did. With a cgroup the whole
// tree is found and killed through cgroup.kill and proven gone by
// `populated 0`; without one only the leader and its process group can be
// found (pinned by the leader's identity; escaped descendants cannot be
// attributed), which Verified.Method says. Nothing is signalled by a
// number whose identity was not re-checked.
func Recover(l Leftover, grace time.Duration) Termination {
	now := time.Now()
	res := Termination{Signals: []SignalRecord{}, Processes: []ProcessRecord{}, Errors: []ErrorRecord{}}
	if l.Cgroup != "" {
		res.Containment = ModeCgroup
		if _, err := os.Stat(l.Cgroup); errors.Is(err, os.ErrNotExist) {
			res.Verified = Verification{TreeEmpty: true, Method: "cgroup already removed"}
			res.Complete = true
			return res
		}
		members := cgroupProcs(l.Cgroup)
		method := "cgroup found empty (cgroup.events populated 0)"
		if pop, _ := cgroupPopulated(l.Cgroup); pop {
			method = "cgroup.kill; cgroup.events populated 0"
			err := os.WriteFile(filepath.Join(l.Cgroup, "cgroup.kill"), []byte("1"), 0)
			rec := SignalRecord{Signal: "SIGKILL", Target: "tree", At: now}
			if err != nil {
				rec.Error = err.Error()
				res.Errors = append(res.Errors, ErrorRecord{Code: CodeSignalFailed, Message: "cgroup.kill: " + err.Error()})
			}
			res.Signals = append(res.Signals, rec)
		}
		empty := waitCgroupEmpty(nil, l.Cgroup, grace, nil)
		for _, pid := range members {
			role := RoleDescendant
			if pid == l.Pid {
				role = RoleProvider
			}
			res.Processes = append(res.Processes, ProcessRecord{Pid: pid, Role: role, Signal: "SIGKILL", ExitedAt: time.Now()})
		}
		if empty {
			if err := unix.Rmdir(l.Cgroup); err != nil && !errors.Is(err, unix.ENOENT) {
				res.Errors = append(res.Errors, ErrorRecord{Code: CodeCgroupRemove, Message: "rmdir " + l.Cgroup + ": " + err.Error()})
			}
		} else {
			res.Errors = append(res.Errors, ErrorRecord{Code: CodeKillTimeout, Message: "cgroup still populated after cgroup.kill"})
		}
		res.Verified = Verification{TreeEmpty: empty, Method: method}
		res.Complete = empty
		return res
	}
	res.Containment = ModeProcessGroup
	info, ok := readStat(l.Pid)
	if !ok || info.state == 'Z' || info.start != l.StartTicks {
		res.Verified = Verification{TreeEmpty: true, Method: "leader gone (pid absent, zombie or recycled); no cgroup to search for escaped descendants"}
		res.Complete = true
		return res
	}
	pidfd, err := unix.PidfdOpen(l.Pid, 0)
	if err == nil {
		defer unix.Close(pidfd)
		// Re-check after pinning: the fd now refers to exactly this process.
		if info, ok = readStat(l.Pid); ok && info.start == l.StartTicks {
			// The live leader pins its process-group id (SEED-BEHAVIOR 22).
			if l.Pgid == l.Pid {
				_ = unix.Kill(-l.Pgid, unix.SIGKILL)
			}
			err = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		}
	}
	rec := SignalRecord{Signal: "SIGKILL", Target: "tree", At: now}
	if err != nil {
		rec.Error = err.Error()
		res.Errors = append(res.Errors, ErrorRecord{Code: CodeSignalFailed, Message: "SIGKILL: " + err.Error()})
	}
	res.Signals = append(res.Signals, rec)
	deadline := time.Now().Add(grace)
	for {
		info, ok = readStat(l.Pid)
		if !ok || info.state == 'Z' || info.start != l.StartTicks {
			res.Processes = append(res.Processes, ProcessRecord{Pid: l.Pid, Role: RoleProvider, Signal: "SIGKILL", ExitedAt: time.Now()})
			res.Verified = Verification{TreeEmpty: true, Method: "leader and its process group killed; no cgroup to search for escaped descendants"}
			res.Complete = true
			return res
		}
		if time.Now().After(deadline) {
			res.Errors = append(res.Errors, ErrorRecord{Code: CodeKillTimeout, Message: "provider did not exit after SIGKILL"})
			res.Verified = Verification{Method: "leader still alive after SIGKILL"}
			return res
		}
		time.Sleep(5 * time.Millisecond) // bounded poll of /proc for a process we cannot wait for
	}
}
