//go:build linux

package reaper

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/guardian"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// Terminate ends the whole tree and reports what was observed:
// SIGTERM to every member -> wait up to termGrace for the tree to be empty
// -> SIGKILL to every member (cgroup.kill in ModeCgroup) -> wait up to
// killGrace -> verify. ctx bounds only the TERM wait (a done ctx escalates
// to SIGKILL at once); the KILL wait is bounded by killGrace alone.
//
// ModeCgroup (no guardian): the sidecar signals the tree itself with the
// one kill algorithm of kill_linux.go; "empty" is cgroup.events "populated
// 0" and then two consecutive clean passes, a reap cycle apart, over this
// process's children (where a process that moved itself out of the cgroup
// re-parents once its parent is gone) and the tracked members.
//
// ModeSubreaper / ModeProcessGroup: while the guardian lives it signals
// the tree (its process group, and through pidfds every live process below
// it) and "empty" means it reported having no descendant left. If the
// guardian died before that, the sidecar does it itself, with the same
// algorithm as in ModeCgroup (orphans of the dead guardian's tree
// re-parent here).
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
	t.terminating.Store(true)
	t.mu.Lock()
	if t.proof.proven {
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
			zap.Int("pid", t.id.pid), zap.Int("guardian", g.pid))
	}

	empty := t.sidecarEmpty(0)
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
		t.proof.errors = append(t.proof.errors, ErrorRecord{Code: CodeKillTimeout, Message: "provider did not exit after SIGKILL"})
		t.proof.verified = Verification{TreeEmpty: false, Method: t.fallbackMethodLocked(false)}
		r := t.resultLocked()
		t.mu.Unlock()
		t.s.log.Warn("reaper: tree not empty after SIGKILL", zap.Int("pid", t.id.pid))
		return r
	}
	return t.finalize(killGrace)
}

// cgroupEmpty reads cgroup.events once; true for a tree without a cgroup.
func (t *Tree) cgroupEmpty() bool {
	if t.cg.path == "" {
		return true
	}
	pop, err := cgroup.Populated(t.cg.path)
	return err == nil && !pop
}

// terminateViaGuardian runs Terminate's steps through the live guardian
// (subreaper and process-group modes): it signals the tree on request and
// reports "empty" once it has no child left. ok is false if the guardian
// exited before the tree was observed empty.
func (t *Tree) terminateViaGuardian(ctx context.Context, termGrace, killGrace time.Duration) (Termination, bool) {
	g := t.g
	isEmpty := func() bool { return isDone(g.empty) }
	empty := isEmpty()
	if !empty && g.alive() && !g.hasLiveDescendant() {
		// Everything already exited (e.g. the leader's exit line was read
		// just before the "empty" line): no signal; wait for the report.
		waitAny(max(killGrace, time.Second), g.empty, g.done)
		empty = isEmpty()
	}
	step := func(sig unix.Signal, cmd string, done <-chan struct{}, d time.Duration) {
		rec := SignalRecord{Signal: unix.SignalName(sig), Target: "tree", At: time.Now()}
		if !g.send(guardian.Cmd{Cmd: cmd}) {
			rec.Error = "guardian control pipe closed"
		}
		t.mu.Lock()
		t.proof.signals = append(t.proof.signals, rec)
		t.mu.Unlock()
		waitAny(d, g.empty, g.done, done)
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
	t.proof.errors = append(t.proof.errors, ErrorRecord{Code: CodeKillTimeout, Message: "provider did not exit after SIGKILL"})
	t.proof.verified = Verification{TreeEmpty: false, Method: "guardian still has live descendants"}
	r := t.resultLocked()
	t.mu.Unlock()
	t.s.log.Warn("reaper: tree not empty after SIGKILL", zap.Int("pid", t.id.pid))
	return r, true
}

// fallbackMethodLocked is Verified.Method for a tree verified (or not)
// from the sidecar's side: a direct cgroup tree, or one whose guardian
// died (t.mu held).
func (t *Tree) fallbackMethodLocked(empty bool) string {
	switch {
	case t.g == nil && empty:
		return methodCgroup + t.outsideNoteLocked()
	case t.g == nil && !t.cgroupEmpty():
		return "cgroup.events populated 1"
	case t.g == nil:
		return "cgroup.events populated 0, but a live process of the tree outside the cgroup remains"
	case empty:
		return methodProc
	}
	return "guardian died before the tree was empty; a live re-parented child of the sidecar or a live tracked process remains"
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
		t.s.log.Warn("reaper: leader not reaped after tree emptied", zap.Int("pid", t.id.pid))
	}
	now := time.Now()
	var rmErr error
	if t.cg.path != "" {
		for i := 0; ; i++ {
			// Depth first: a provider running as root may have created
			// sub-cgroups (cgroup.kill ended their processes too).
			rmErr = cgroup.RemoveSubtree(t.cg.path)
			if rmErr == nil {
				break
			}
			if i >= 50 {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	v1Err := t.removeLimitCgroups() // the cgroup v1 limit dirs, now empty too
	t.mu.Lock()
	for _, m := range t.members {
		if !m.reaped && !m.gone {
			m.gone, m.at = true, now
		}
	}
	if rmErr != nil {
		t.proof.errors = append(t.proof.errors, ErrorRecord{Code: CodeCgroupRemove, Message: rmErr.Error()})
	}
	if v1Err != nil {
		t.proof.errors = append(t.proof.errors, ErrorRecord{Code: CodeCgroupRemove, Message: v1Err.Error()})
	}
	switch {
	case t.g != nil && isDone(t.g.empty):
		t.proof.verified = Verification{TreeEmpty: true, Method: methodGuardian}
	default:
		t.proof.verified = Verification{TreeEmpty: true, Method: t.fallbackMethodLocked(true)}
	}
	t.proof.proven = true
	r := t.resultLocked()
	t.mu.Unlock()
	if t.g == nil && rmErr == nil {
		t.s.unwatchCgroup(t.cg.path)
	}
	t.c.unregister(t)
	t.s.forget(t)
	t.closeFDs()
	return r
}

// outsideNoteLocked names the processes of the tree found outside the
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
	t.closeInitCtlLocked()
}

func (t *Tree) resultLocked() Termination {
	r := Termination{
		Signals:     append([]SignalRecord{}, t.proof.signals...),
		Containment: t.mode,
		Verified:    t.proof.verified,
		Complete:    t.proof.proven,
		Errors:      append([]ErrorRecord(nil), t.proof.errors...),
	}
	procs := make([]ProcessRecord, 0, len(t.order))
	for _, m := range t.order {
		if !m.reaped && !m.gone {
			continue // still alive: not (yet) part of the proof
		}
		procs = append(procs, ProcessRecord{Pid: m.key.pid, Role: m.role, ExitCode: m.code,
			Signal: m.sig, ExitedAt: m.at, Reaped: m.reaped}.withHowEnded())
	}
	sort.SliceStable(procs, func(i, j int) bool {
		return procs[i].Role == RoleProvider && procs[j].Role != RoleProvider
	})
	r.Processes = procs
	return r
}
