//go:build linux || darwin

package tablemode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
)

// Verified.Method texts of reaper.ModeProcessTable (docs/protocol.md §12
// `verified`). They say what the mode looked at and what it cannot see.
const (
	methodTable = "process-table: two consecutive scans of the process table, a reap cycle apart, found no live process of the tree " +
		"(its process group while pinned, descendants of tracked processes by parent chain, processes carrying the session's " +
		"environment marker; every pid checked against its start time). Not visible to this mode: a process that left the " +
		"group, removed the marker from its environment and was orphaned between two scans (100 ms apart)"
	methodTableLive = "process-table: live processes of the tree remain after SIGKILL"
	methodTableRead = "process-table: the process table could not be read"
)

// tablePoll is the pause between two checks while a tree is waited for.
const tablePoll = 5 * time.Millisecond

// Terminate ends the whole tree and reports what was observed: SIGTERM to
// the process group (while the leader is unreaped) and to every live
// member (each pinned: Linux pidfd, Darwin a start-time re-check) -> wait
// up to termGrace for the tree to be empty -> SIGKILL likewise -> wait up
// to killGrace. Members found while waiting (forks racing the signal) get
// the same signal, once each. "Empty" is two consecutive scans of the
// process table, with a reap pass between them, that find no live process
// of the tree (Tree.update says which processes those are); then the
// leader's exit is collected and later calls return the same result at
// once. ctx bounds only the TERM wait (a done ctx escalates to SIGKILL).
//
// Complete is true only if the tree was observed empty. After an
// incomplete result the caller retries (docs/rules.md#r20); results are
// cumulative. Concurrent calls are serialized. Errors:
// reaper.CodeSignalFailed per failed delivery, then
// reaper.CodeKillTimeout.
func (t *Tree) Terminate(ctx context.Context, termGrace, killGrace time.Duration) reaper.Termination {
	// Left as a copy of reaper.Tree.Terminate's opening: it reads this mode's own proof under this Tree's locks.
	t.termMu.Lock()
	defer t.termMu.Unlock()
	t.mu.Lock()
	if t.proof.proven {
		r := t.resultLocked()
		t.mu.Unlock()
		return r
	}
	t.mu.Unlock()
	empty, err := t.emptyCheck(0)
	if !empty && err == nil {
		t.signalTree(unix.SIGTERM)
		empty, err = t.waitEmpty(ctx.Done(), termGrace, unix.SIGTERM)
	}
	if !empty && err == nil {
		t.signalTree(unix.SIGKILL)
		empty, err = t.waitEmpty(nil, killGrace, unix.SIGKILL)
	}
	if empty {
		return t.finalize(killGrace)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.proof.errors = append(t.proof.errors, reaper.ErrorRecord{Code: reaper.CodeKillTimeout, Message: "provider tree not verified gone: " + err.Error()})
		t.proof.verified = reaper.Verification{Method: methodTableRead}
	} else {
		t.proof.errors = append(t.proof.errors, reaper.ErrorRecord{Code: reaper.CodeKillTimeout, Message: "provider did not exit after SIGKILL"})
		t.proof.verified = reaper.Verification{Method: methodTableLive + " (" + t.liveNoteLocked() + ")"}
	}
	t.s.log.Warn("reaper: process-table tree not empty after SIGKILL", zap.Int("pid", t.id.pid), zap.Error(err))
	return t.resultLocked()
}

// liveNoteLocked names the members not known gone: "pid 12, pid 40".
func (t *Tree) liveNoteLocked() string {
	var parts []string
	for _, m := range t.order {
		if !m.dead {
			parts = append(parts, fmt.Sprintf("pid %d", m.key.pid))
		}
	}
	return strings.Join(parts, ", ")
}

// signalTree sends sig to the tree (the group while pinned, then every
// live member of a fresh scan) and records the step.
func (t *Tree) signalTree(sig unix.Signal) {
	now := time.Now()
	var errs []string
	if err := t.signalGroup(sig); err != nil {
		errs = append(errs, err.Error())
	}
	if s, err := t.c.scanAfter(now); err == nil {
		_, lerrs := t.signalLive(s, sig)
		errs = append(errs, lerrs...)
	} else {
		errs = append(errs, err.Error())
	}
	rec := reaper.SignalRecord{Signal: unix.SignalName(sig), Target: "tree", At: now}
	if len(errs) > 0 {
		rec.Error = strings.Join(errs, "; ")
	}
	t.mu.Lock()
	t.proof.signals = append(t.proof.signals, rec)
	t.mu.Unlock()
	t.recordSignalErrors(sig, errs)
}

// signalGroup signals the process group only while the leader is unreaped,
// holding the waiter's reap lock so it cannot be reaped meanwhile (its pid,
// and so the group id, stays pinned; docs/rules.md#r22).
func (t *Tree) signalGroup(sig unix.Signal) error {
	t.c.w.reapMu.Lock()
	defer t.c.w.reapMu.Unlock()
	t.mu.Lock()
	pinned := !t.leaderReaped
	t.mu.Unlock()
	if !pinned {
		return nil
	}
	if err := unix.Kill(-t.id.pgid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("process group %d: %v", t.id.pgid, err)
	}
	return nil
}

// signalLive sends sig to every member live in s not yet sent sig, each
// through signalTablePinned; it returns how many it tried and the delivery
// errors.
func (t *Tree) signalLive(s *tableScan, sig unix.Signal) (int, []string) {
	t.mu.Lock()
	var todo []tableKey
	for _, k := range t.liveLocked(s) {
		m := t.members[k]
		if sig == unix.SIGTERM && !m.term || sig == unix.SIGKILL && !m.kill {
			todo = append(todo, k)
			m.term = m.term || sig == unix.SIGTERM
			m.kill = m.kill || sig == unix.SIGKILL
			m.sent = unix.SignalName(sig)
		}
	}
	t.mu.Unlock()
	var errs []string
	for _, k := range todo {
		if _, err := signalTablePinned(t.procs, k, sig); err != nil {
			errs = append(errs, err.Error())
		}
	}
	return len(todo), errs
}

// recordSignalErrors appends one CodeSignalFailed error per delivery error.
func (t *Tree) recordSignalErrors(sig unix.Signal, errs []string) {
	if len(errs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.proof.errors = append(t.proof.errors, reaper.SignalFailedRecords(sig, errs)...)
}

// emptyCheck is the verification: a scan that began now finds no live
// member; then a reap pass; then a second scan that began after it finds
// none either. With sig set, members either scan finds live get sig (once
// each). An error means the table could not be read.
func (t *Tree) emptyCheck(sig unix.Signal) (bool, error) {
	for i := 0; i < 2; i++ {
		if i == 1 {
			t.c.w.reapNow()
		}
		s, err := t.c.scanAfter(time.Now())
		if err != nil {
			return false, err
		}
		t.mu.Lock()
		n := len(t.liveLocked(s))
		t.mu.Unlock()
		if n > 0 {
			if sig != 0 {
				_, errs := t.signalLive(s, sig)
				t.recordSignalErrors(sig, errs)
			}
			return false, nil
		}
	}
	return true, nil
}

// waitEmpty repeats emptyCheck(sig) until it holds, d passes or done
// closes.
func (t *Tree) waitEmpty(done <-chan struct{}, d time.Duration, sig unix.Signal) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		empty, err := t.emptyCheck(sig)
		if empty || err != nil {
			return empty, err
		}
		rem := time.Until(deadline)
		if rem <= 0 {
			return false, nil
		}
		select {
		case <-done:
			return false, nil
		case <-time.After(min(rem, tablePoll)):
		}
	}
}

// finalize runs once the tree was observed empty: the leader's exit is
// collected (bounded), every member is recorded, the tree is proven and
// leaves the registry.
func (t *Tree) finalize(bound time.Duration) reaper.Termination {
	t.c.w.reapNow()
	select {
	case <-t.exited:
	case <-time.After(max(bound, 100*time.Millisecond)):
		// Not our child any more? Cannot happen; the proof still holds
		// (no live process of the tree) but the leader's status is unknown.
		t.s.log.Warn("reaper: process-table leader not reaped after the tree emptied", zap.Int("pid", t.id.pid))
	}
	now := time.Now()
	t.mu.Lock()
	for _, m := range t.order {
		if !m.dead {
			m.dead, m.at = true, now
		}
	}
	t.proof.verified = reaper.Verification{TreeEmpty: true, Method: methodTable}
	t.proof.proven = true
	r := t.resultLocked()
	t.mu.Unlock()
	t.c.unregister(t)
	t.s.forget(t)
	return r
}
