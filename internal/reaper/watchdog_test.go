//go:build linux

package reaper

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctest"
)

// TestWatchdogKilled_NewWatchdogCoversLiveTrees: the watchdog SIGKILLed
// while the sidecar lives is replaced, and the new one has every live
// provider cgroup registered: when its pipe closes (as at the sidecar's
// death) it kills the tree, and the tree's cgroup is gone.
func TestWatchdogKilled_NewWatchdogCoversLiveTrees(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeCgroup, mark)
	tr := startSh(t, s, env, `trap "" TERM; setsid sh -c 'trap "" TERM; exec sleep 1000' & echo up; exec sleep 1000`)
	proctest.ReadLines(t, tr, 1)
	// "up" can come before the background child is readable in /proc (it
	// may be inside execve): wait for both, with a deadline.
	for deadline := time.Now().Add(5 * time.Second); len(proctest.Alive(mark)) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d marked processes alive, want the provider and its setsid child", len(proctest.Alive(mark)))
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.mu.Lock()
	old := s.wd
	s.mu.Unlock()
	if err := unix.Kill(old.pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitAny(10*time.Second, old.reaped) {
		t.Fatal("old watchdog not reaped")
	}
	var nw *watchdogConn
	for deadline := time.Now().Add(10 * time.Second); nw == nil || nw == old; {
		if time.Now().After(deadline) {
			t.Fatal("no new watchdog")
		}
		time.Sleep(5 * time.Millisecond) // the restart runs on its own goroutine
		s.mu.Lock()
		nw = s.wd
		s.mu.Unlock()
	}
	nw.close() // what the sidecar's death does
	select {
	case <-tr.Exited():
	case <-time.After(15 * time.Second):
		t.Fatal("the new watchdog did not kill the tree")
	}
	for deadline := time.Now().Add(10 * time.Second); len(proctest.Alive(mark)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("alive after the new watchdog's kill: %v", proctest.Alive(mark))
		}
		time.Sleep(5 * time.Millisecond)
	}
	term := tr.Terminate(context.Background(), termGrace, killGrace)
	if !term.Complete {
		t.Fatalf("incomplete after the watchdog's kill: %+v", term)
	}
}
