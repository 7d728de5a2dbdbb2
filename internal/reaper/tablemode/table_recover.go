//go:build linux || darwin

package tablemode

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
)

// methodTableRecovered is Verified.Method of a complete Recover.
const methodTableRecovered = "process-table: two consecutive scans of the process table, a reap cycle apart, found no live " +
	"process of the leftover tree (its process group while its leader lived, processes carrying the session's environment " +
	"marker, their descendants by parent chain; every pid checked against its start time). Not visible: a process that " +
	"left the group and removed the marker from its environment (its parent chain broke when the sidecar died)"

// Recover kills whatever is left of a reaper.ModeProcessTable tree whose
// sidecar died (the mode has no watchdog: the next sidecar on the
// same stateDir does this from the ownership ledger, docs/operations.md
// "The ownership ledger"), within grace, and reports what it did. The
// entry l is a claim trusted only as far as it is proven, as for
// reaper.Recover: the tree is every process whose environment carries
// reaper.MarkerEnv with
// l.MarkerSHA256's entry; the leader (l.Pid with l.StartTicks) and then its
// process group (l.Pgid) while it lives only when the leader carries that
// marker too; and their descendants by parent chain (Tree.update).
// Every live one is sent SIGKILL (pinned as in Terminate), pass after pass
// (forks racing the kill are caught by the next), until two consecutive
// scans a reap cycle apart find none. Complete means they did;
// Verified.Method says what was looked at and what cannot be seen.
// Errors: reaper.ErrUnprovable (nothing killed) for an entry without a digest or
// with a malformed session id, or whose live leader does not carry the
// marker; in the Termination, reaper.CodeSignalFailed per failed
// delivery, reaper.CodeKillTimeout if grace ran out or the table could not be read.
func Recover(l reaper.Leftover, grace time.Duration) (reaper.Termination, error) {
	res := reaper.Termination{Signals: []reaper.SignalRecord{}, Processes: []reaper.ProcessRecord{}, Errors: []reaper.ErrorRecord{}, Containment: reaper.ModeProcessTable}
	if len(l.MarkerSHA256) != sha256.Size*2 || !reaper.IsSessionID(l.Session) {
		return res, fmt.Errorf("%w: no marker digest or a malformed session id", reaper.ErrUnprovable)
	}
	procs, err := proctable.New()
	if err != nil {
		res.Errors = append(res.Errors, reaper.ErrorRecord{Code: reaper.CodeKillTimeout, Message: "leftover tree not verified gone: " + err.Error()})
		res.Verified = reaper.Verification{Method: methodTableRead}
		return res, nil
	}
	carries := func(env []string) bool {
		e := markerEntry(env, []string{reaper.MarkerEnv + "="})
		return e != "" && reaper.MarkerDigest(e) == l.MarkerSHA256
	}
	t := &Tree{procs: procs, leaderReaped: true, members: map[tableKey]*tableMember{}}
	if l.Pid > 0 && l.StartTicks != 0 {
		if p, err := procs.Stat(l.Pid); err == nil && !p.Zombie && p.Start == l.StartTicks {
			env, err := procs.Environ(l.Pid)
			if err == nil && !carries(env) {
				return res, fmt.Errorf("%w: its pid %d is alive with its start time but does not carry the tree's marker", reaper.ErrUnprovable, l.Pid)
			}
			if err == nil {
				t.id.pid, t.id.pgid, t.id.start = l.Pid, l.Pgid, l.StartTicks
				t.addLocked(tableKey{l.Pid, l.StartTicks}, time.Time{})
			}
		}
	}
	names := []string{reaper.MarkerEnv + "="}
	lookup := func(entry string) *Tree {
		if reaper.MarkerDigest(entry) == l.MarkerSHA256 {
			return t
		}
		return nil
	}
	envs := newEnvReader(procs, zap.NewNop())
	defer envs.close()
	deadline := time.Now().Add(grace)
	self := os.Getpid()
	for clean := 0; clean < 2; {
		at := time.Now()
		list, err := procs.List()
		if err != nil {
			res.Errors = append(res.Errors, reaper.ErrorRecord{Code: reaper.CodeKillTimeout, Message: "leftover tree not verified gone: " + err.Error()})
			res.Verified = reaper.Verification{Method: methodTableRead}
			return recoveredResult(t, res), nil
		}
		s := newTableScan(at, list, self)
		lp, ok := s.procs[t.id.pid]
		t.leaderReaped = !(t.id.pid > 0 && ok && lp.Start == t.id.start)
		s.marked = envs.marked(s, lookup, names, envWait)
		t.update(s)
		n, errs := t.signalLive(s, unix.SIGKILL)
		if n > 0 {
			rec := reaper.SignalRecord{Signal: "SIGKILL", Target: "tree", At: at}
			if len(errs) > 0 {
				rec.Error = strings.Join(errs, "; ")
			}
			t.proof.signals = append(t.proof.signals, rec)
			t.recordSignalErrors(unix.SIGKILL, errs)
		}
		t.mu.Lock()
		live := len(t.liveLocked(s))
		t.mu.Unlock()
		if live == 0 {
			clean++
		} else {
			clean = 0
		}
		if clean < 2 && time.Now().After(deadline) {
			res.Errors = append(res.Errors, reaper.ErrorRecord{Code: reaper.CodeKillTimeout, Message: "leftover processes did not exit after SIGKILL"})
			t.mu.Lock()
			res.Verified = reaper.Verification{Method: methodTableLive + " (" + t.liveNoteLocked() + ")"}
			t.mu.Unlock()
			return recoveredResult(t, res), nil
		}
		// A reap cycle: the leftovers' parents (init, launchd, or a live
		// member) collect what was killed before the next scan.
		time.Sleep(tablePoll)
	}
	t.mu.Lock()
	now := time.Now()
	for _, m := range t.order {
		if !m.dead {
			m.dead, m.at = true, now
		}
	}
	t.mu.Unlock()
	res.Verified = reaper.Verification{TreeEmpty: true, Method: methodTableRecovered}
	res.Complete = true
	return recoveredResult(t, res), nil
}

// recoveredResult fills res with t's signals, processes and errors.
func recoveredResult(t *Tree, res reaper.Termination) reaper.Termination {
	t.mu.Lock()
	r := t.resultLocked()
	t.mu.Unlock()
	res.Signals = r.Signals
	res.Processes = r.Processes
	res.Errors = append(r.Errors, res.Errors...)
	return res
}
