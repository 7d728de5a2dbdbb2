//go:build linux || darwin

package reaper

import (
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
)

// methodTableRecovered is Verified.Method of a complete RecoverTable.
const methodTableRecovered = "process-table: two consecutive scans of the process table, a reap cycle apart, found no live " +
	"process of the leftover tree (its process group while its leader lived, processes carrying the session's environment " +
	"marker, their descendants by parent chain; every pid checked against its start time). Not visible: a process that " +
	"left the group and removed the marker from its environment (its parent chain broke when the sidecar died)"

// RecoverTable kills whatever is left of a ModeProcessTable tree whose
// sidecar died (ModeProcessTable has no watchdog: the next sidecar on the
// same stateDir does this from the ownership ledger, docs/operations.md
// "The ownership ledger"), within grace, and reports what it did. It runs
// the mode's own membership rules (TableTree.update) over the ledger's
// identity l — the leader (pid and start time; none when the entry was
// written before the launch), its process group while that leader lives,
// the marker entry — and their descendants by parent chain: every live
// one is sent SIGKILL (pinned as in Terminate), pass after pass (forks
// racing the kill are caught by the next), until two consecutive scans a
// reap cycle apart find none. Complete means they did; Verified.Method
// says what was looked at and what cannot be seen. Errors:
// CodeSignalFailed per failed delivery, CodeKillTimeout if grace ran out
// or the table could not be read.
func RecoverTable(l Leftover, grace time.Duration) Termination {
	res := Termination{Signals: []SignalRecord{}, Processes: []ProcessRecord{}, Errors: []ErrorRecord{}, Containment: ModeProcessTable}
	procs, err := proctable.New()
	if err != nil {
		res.Errors = append(res.Errors, ErrorRecord{Code: CodeKillTimeout, Message: "leftover tree not verified gone: " + err.Error()})
		res.Verified = Verification{Method: methodTableRead}
		return res
	}
	t := &TableTree{procs: procs, pid: l.Pid, pgid: l.Pgid, start: l.StartTicks, marker: l.Marker, leaderReaped: true,
		members: map[tableKey]*tableMember{}}
	if l.Pid > 0 && l.StartTicks != 0 {
		t.addLocked(tableKey{l.Pid, l.StartTicks}, time.Time{})
	}
	var names []string
	if name, _, ok := strings.Cut(l.Marker, "="); ok && name != "" {
		names = []string{name + "="}
	}
	envs := newEnvReader(procs, zap.NewNop())
	defer envs.close()
	deadline := time.Now().Add(grace)
	self := os.Getpid()
	for clean := 0; clean < 2; {
		at := time.Now()
		list, err := procs.List()
		if err != nil {
			res.Errors = append(res.Errors, ErrorRecord{Code: CodeKillTimeout, Message: "leftover tree not verified gone: " + err.Error()})
			res.Verified = Verification{Method: methodTableRead}
			return recoveredResult(t, res)
		}
		s := newTableScan(at, list, self)
		lp, ok := s.procs[l.Pid]
		t.leaderReaped = !(l.Pid > 0 && l.StartTicks != 0 && ok && lp.Start == l.StartTicks)
		s.marked = envs.marked(s, map[string]*TableTree{l.Marker: t}, names, envWait)
		t.update(s)
		n, errs := t.signalLive(s, unix.SIGKILL)
		if n > 0 {
			rec := SignalRecord{Signal: "SIGKILL", Target: "tree", At: at}
			if len(errs) > 0 {
				rec.Error = strings.Join(errs, "; ")
			}
			t.signals = append(t.signals, rec)
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
			res.Errors = append(res.Errors, ErrorRecord{Code: CodeKillTimeout, Message: "leftover processes did not exit after SIGKILL"})
			t.mu.Lock()
			res.Verified = Verification{Method: methodTableLive + " (" + t.liveNoteLocked() + ")"}
			t.mu.Unlock()
			return recoveredResult(t, res)
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
	res.Verified = Verification{TreeEmpty: true, Method: methodTableRecovered}
	res.Complete = true
	return recoveredResult(t, res)
}

// recoveredResult fills res with t's signals, processes and errors.
func recoveredResult(t *TableTree, res Termination) Termination {
	t.mu.Lock()
	r := t.resultLocked()
	t.mu.Unlock()
	res.Signals = r.Signals
	res.Processes = r.Processes
	res.Errors = append(r.Errors, res.Errors...)
	return res
}
