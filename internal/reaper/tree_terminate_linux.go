//go:build linux

package reaper

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Terminate ends the whole tree and reports what was observed:
// SIGTERM to every member -> wait up to termGrace for the tree to be empty
// -> SIGKILL to every member (cgroup.kill in ModeCgroup) -> wait up to
// killGrace -> verify. ctx bounds only the TERM wait (a done ctx escalates
// to SIGKILL at once); the KILL wait is bounded by killGrace alone.
//
// While the guardian lives, in every mode, the guardian signals the tree
// (its process group, and through pidfds every live process below it,
// inside the cgroup or not, plus every cgroup member) and "empty" means it
// reported having no descendant left — AND, in ModeCgroup, cgroup.events
// says populated 0. If the guardian died before that, the sidecar does it
// itself (see fallbackPass): the cgroup, the tracked members, and every
// live child of this process that is not a guardian (an orphan of the dead
// guardian's tree, re-parented here), each signalled through a pidfd
// pinned while it cannot be reaped; "empty" then needs two consecutive
// clean passes with a reap cycle between them.
//
// Complete is true only if the tree was observed empty (docs/protocol.md
// §12); then the cgroup (and any cgroup below it) is removed and later calls
// return the same result at once. Verified.Method says what was observed.
// After an incomplete result the caller retries with backoff
// (docs/rules.md#r20); results are cumulative. Concurrent calls are
// serialized. Errors: CodeSignalFailed per failed delivery, then
// CodeKillTimeout (docs/rules.md#r12), CodeCgroupRemove.
func (t *Tree) Terminate(ctx context.Context, termGrace, killGrace time.Duration) Termination {
	t.termMu.Lock()
	defer t.termMu.Unlock()
	t.mu.Lock()
	if t.proven {
		r := t.resultLocked()
		t.mu.Unlock()
		return r
	}
	t.mu.Unlock()

	if g := t.g; g != nil {
		if g.gone() {
			// Dead: let its last status lines (exits, "empty") be read
			// before deciding whether it left anything behind.
			waitAny(time.Second, g.done)
		}
		if !t.guardianDiedEarly() {
			if r, ok := t.terminateViaGuardian(ctx, termGrace, killGrace); ok {
				return r
			}
		}
		// The guardian died with the tree not (known to be) empty: its
		// orphans came to this (subreaper) process.
		t.s.log.Warn("reaper: guardian gone before the tree was empty; the sidecar ends and verifies the tree itself",
			zap.Int("pid", t.pid), zap.Int("guardian", g.pid))
	}

	empty := t.fallbackEmpty(0)
	if !empty {
		t.signalTree(unix.SIGTERM)
		empty = t.waitEmpty(ctx.Done(), termGrace, unix.SIGTERM)
	}
	if !empty {
		t.signalTree(unix.SIGKILL)
		empty = t.waitEmpty(nil, killGrace, unix.SIGKILL)
	}
	if !empty {
		t.mu.Lock()
		t.errors = append(t.errors, ErrorRecord{Code: CodeKillTimeout, Message: "provider did not exit after SIGKILL"})
		t.verified = Verification{TreeEmpty: false, Method: t.fallbackMethod(false)}
		r := t.resultLocked()
		t.mu.Unlock()
		t.s.log.Warn("reaper: tree not empty after SIGKILL", zap.Int("pid", t.pid))
		return r
	}
	return t.finalize(killGrace)
}

// cgroupEmpty reads cgroup.events once; true for a tree without a cgroup.
func (t *Tree) cgroupEmpty() bool {
	if t.cgPath == "" {
		return true
	}
	pop, err := cgroupPopulated(t.cgPath)
	return err == nil && !pop
}

// terminateViaGuardian runs Terminate's steps through the live guardian
// (every mode): it signals the tree on request and reports "empty" once it
// has no child left. In ModeCgroup the sidecar also writes cgroup.kill
// for SIGKILL, and the tree is empty only when the guardian reported
// "empty" AND the cgroup is not populated. ok is false if the guardian
// exited before the tree was observed empty.
func (t *Tree) terminateViaGuardian(ctx context.Context, termGrace, killGrace time.Duration) (Termination, bool) {
	g := t.g
	isEmpty := func() bool { return isDone(g.empty) && t.cgroupEmpty() }
	empty := isEmpty()
	if !empty && g.alive() && t.cgroupEmpty() && !g.hasLiveDescendant() {
		// Everything already exited (e.g. the leader's exit line was read
		// just before the "empty" line): no signal; wait for the report.
		waitAny(max(killGrace, time.Second), g.empty, g.done)
		empty = isEmpty()
	}
	step := func(sig unix.Signal, cmd string, done <-chan struct{}, d time.Duration) {
		deadline := time.Now().Add(d)
		rec := SignalRecord{Signal: unix.SignalName(sig), Target: "tree", At: time.Now()}
		var errs []string
		if sig == unix.SIGKILL && t.cgPath != "" {
			// Not left to the guardian alone.
			if err := os.WriteFile(filepath.Join(t.cgPath, "cgroup.kill"), []byte("1"), 0); err != nil {
				errs = append(errs, "cgroup.kill: "+err.Error())
			}
		}
		if !g.send(guardianCmd{Cmd: cmd}) {
			errs = append(errs, "guardian control pipe closed")
		}
		t.mu.Lock()
		if len(errs) > 0 {
			rec.Error = strings.Join(errs, "; ")
		}
		t.signals = append(t.signals, rec)
		for _, e := range errs {
			if strings.HasPrefix(e, "cgroup.kill") {
				t.errors = append(t.errors, ErrorRecord{Code: CodeSignalFailed, Message: unix.SignalName(sig) + ": " + e})
			}
		}
		t.mu.Unlock()
		if t.cgPath != "" {
			waitCgroupEmpty(done, t.cgPath, d, func() { t.trackCgroup(time.Now()) })
		}
		waitAny(time.Until(deadline), g.empty, g.done, done)
		// If the guardian exited, its last lines are read (done closes
		// after them): "empty" is final.
		empty = isEmpty()
	}
	if !empty && g.alive() {
		step(unix.SIGTERM, "term", ctx.Done(), termGrace)
	}
	if !empty && g.alive() {
		step(unix.SIGKILL, "kill", nil, killGrace)
	}
	if empty {
		return t.finalize(killGrace), true
	}
	if !g.alive() {
		return Termination{}, false
	}
	t.mu.Lock()
	t.errors = append(t.errors, ErrorRecord{Code: CodeKillTimeout, Message: "provider did not exit after SIGKILL"})
	method := "guardian still has live descendants"
	if t.cgPath != "" {
		switch {
		case !t.cgroupEmpty() && !isDone(g.empty):
			method = "cgroup.events populated 1; guardian still has live descendants"
		case !t.cgroupEmpty():
			method = "cgroup.events populated 1"
		default:
			method = "cgroup.events populated 0, but the guardian still has live descendants (outside the cgroup)"
		}
	}
	t.verified = Verification{TreeEmpty: false, Method: method}
	r := t.resultLocked()
	t.mu.Unlock()
	t.s.log.Warn("reaper: tree not empty after SIGKILL", zap.Int("pid", t.pid))
	return r, true
}

// fallbackPass checks (and, if sig is not 0, signals) the tree once from
// the sidecar's side, for a tree whose guardian died early: the live
// children of this process attributed to it (central.sweepChildren), the
// cgroup (populated, members), and the tracked members in a /proc
// snapshot. It reports whether none of them showed a live process, and
// the delivery errors.
func (t *Tree) fallbackPass(sig unix.Signal) (bool, []string) {
	n, errs := t.c.sweepChildren(t, sig)
	clean := n == 0
	if t.cgPath != "" {
		t.trackCgroup(time.Now())
		if !t.cgroupEmpty() {
			clean = false
		}
	}
	snap := scanProcs()
	t.c.adoptOrphans(snap)
	t.track(snap)
	if len(t.liveMembers(snap)) > 0 {
		clean = false
	}
	if sig != 0 {
		errs = append(errs, t.signalLive(snap, sig)...)
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
	for _, e := range errs {
		t.errors = append(t.errors, ErrorRecord{Code: CodeSignalFailed, Message: unix.SignalName(sig) + ": " + e})
	}
}

// fallbackEmpty is the sidecar-side verification: two consecutive clean
// fallbackPasses with a reap pass between them (so a child that was
// exiting during the first pass is collected, and one re-parented to us
// meanwhile is seen by the second).
func (t *Tree) fallbackEmpty(sig unix.Signal) bool {
	clean, errs := t.fallbackPass(sig)
	t.recordSignalErrors(sig, errs)
	if !clean {
		return false
	}
	t.c.reapPass()
	clean, errs = t.fallbackPass(sig)
	t.recordSignalErrors(sig, errs)
	return clean
}

// fallbackMethod is Verified.Method for a tree verified (or not) from the
// sidecar's side after its guardian died.
func (t *Tree) fallbackMethod(empty bool) string {
	if empty {
		if t.cgPath != "" {
			return methodCgroupFallback
		}
		return methodProc
	}
	if t.g != nil && isDone(t.g.empty) {
		// Only possible with a cgroup: what is left is not below the guardian.
		return "cgroup.events populated 1 (the guardian reaped every descendant)"
	}
	if t.cgPath != "" && !t.cgroupEmpty() {
		return "cgroup.events populated 1 (guardian died before the tree was empty)"
	}
	return "guardian died before the tree was empty; a live re-parented child of the sidecar or a live tracked process remains"
}

// waitEmpty waits up to d for the tree (guardian dead) to be observed
// empty by fallbackEmpty; processes that appear meanwhile are recorded and
// signalled with sig (once each).
func (t *Tree) waitEmpty(done <-chan struct{}, d time.Duration, sig unix.Signal) bool {
	deadline := time.Now().Add(d)
	for {
		if t.cgPath != "" && !t.cgroupEmpty() {
			// Kernel-side wait first; then the full verification.
			waitCgroupEmpty(done, t.cgPath, min(time.Until(deadline), 50*time.Millisecond), func() { t.trackCgroup(time.Now()) })
		}
		if t.fallbackEmpty(sig) {
			return true
		}
		rem := time.Until(deadline)
		if rem <= 0 || isDone(done) {
			return false
		}
		sleepOrDone(done, min(rem, 2*time.Millisecond))
	}
}

// finalize runs once the tree was observed empty: reap what is left, record
// every member, remove the cgroup, and mark the tree proven.
func (t *Tree) finalize(bound time.Duration) Termination {
	if g := t.g; g != nil {
		// Every wait status the guardian collected is reported before
		// "empty", and it exits right after; wait for it to be reaped so
		// no zombie of ours outlives the proof.
		b := max(bound, time.Second)
		if !waitAny(b, g.empty, g.done) || !waitAny(b, g.done) || !waitAny(b, g.reaped) {
			t.s.log.Warn("reaper: guardian did not exit after the tree emptied", zap.Int("guardian", g.pid))
		}
	}
	t.c.reapPass()
	select {
	case <-t.exited:
	case <-time.After(max(bound, 100*time.Millisecond)):
		// Not our child any more? Cannot happen; the proof still holds
		// (tree empty) but the leader's status stays unknown.
		t.s.log.Warn("reaper: leader not reaped after tree emptied", zap.Int("pid", t.pid))
	}
	now := time.Now()
	var rmErr error
	if t.cgPath != "" {
		for i := 0; ; i++ {
			// Depth first: a provider running as root may have created
			// sub-cgroups (cgroup.kill ended their processes too).
			rmErr = removeCgroupSubtree(t.cgPath)
			if rmErr == nil {
				break
			}
			if i >= 50 {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	t.mu.Lock()
	for _, m := range t.members {
		if !m.reaped && !m.gone {
			m.gone, m.at = true, now
		}
	}
	if rmErr != nil {
		t.errors = append(t.errors, ErrorRecord{Code: CodeCgroupRemove, Message: rmErr.Error()})
	}
	switch {
	case t.g != nil && isDone(t.g.empty) && t.cgPath != "":
		t.verified = Verification{TreeEmpty: true, Method: methodCgroup + t.outsideNoteLocked()}
	case t.g != nil && isDone(t.g.empty):
		t.verified = Verification{TreeEmpty: true, Method: methodGuardian}
	default:
		t.verified = Verification{TreeEmpty: true, Method: t.fallbackMethod(true)}
	}
	t.proven = true
	r := t.resultLocked()
	t.mu.Unlock()
	t.c.unregister(t)
	t.s.forget(t)
	t.closeFDs()
	return r
}

// outsideNoteLocked names the processes the guardian found outside the
// provider's cgroup (moved out by the tree itself), for Verified.Method:
// "" if none, else "; 2 of them had left the cgroup: pid 12 (in /), ...".
func (t *Tree) outsideNoteLocked() string {
	var parts []string
	for _, m := range t.order {
		if m.outside != "" {
			parts = append(parts, fmt.Sprintf("pid %d (in %s)", m.key.pid, m.outside))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d of them had left the cgroup: %s", len(parts), strings.Join(parts, ", "))
}

func (t *Tree) closeFDs() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pidfd >= 0 {
		unix.Close(t.pidfd)
		t.pidfd = -1
	}
}

func (t *Tree) resultLocked() Termination {
	r := Termination{
		Signals:     append([]SignalRecord{}, t.signals...),
		Containment: t.mode,
		Verified:    t.verified,
		Complete:    t.proven,
		Errors:      append([]ErrorRecord(nil), t.errors...),
	}
	procs := make([]ProcessRecord, 0, len(t.order))
	for _, m := range t.order {
		if !m.reaped && !m.gone {
			continue // still alive: not (yet) part of the proof
		}
		procs = append(procs, ProcessRecord{Pid: m.key.pid, Role: m.role, ExitCode: m.code,
			Signal: m.sig, ExitedAt: m.at, Reaped: m.reaped})
	}
	sort.SliceStable(procs, func(i, j int) bool {
		return procs[i].Role == RoleProvider && procs[j].Role != RoleProvider
	})
	r.Processes = procs
	return r
}
