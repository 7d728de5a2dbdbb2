package osthread

import (
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunLockedOffMain_NeverOnTheMainThread: fn never runs on the main
// thread, over many runs.
func TestRunLockedOffMain_NeverOnTheMainThread(t *testing.T) {
	for i := 0; i < 200; i++ {
		var tid int
		RunLockedOffMain(func() { tid = unix.Gettid() })
		if tid == unix.Getpid() || tid == 0 {
			t.Fatalf("run %d: fn ran on thread %d (the main thread is %d)", i, tid, unix.Getpid())
		}
	}
}

// TestRunOffMain_MovesOffAThreadFoundToBeMain: when the locked thread is
// found to be the main one, fn runs on another thread, and that thread
// (not the one found) is the one left to end.
func TestRunOffMain_MovesOffAThreadFoundToBeMain(t *testing.T) {
	var outer, inner atomic.Int64
	runOffMain(func() { inner.Store(int64(unix.Gettid())) }, func() bool {
		outer.Store(int64(unix.Gettid()))
		return true
	})
	if inner.Load() == 0 || inner.Load() == outer.Load() {
		t.Fatalf("fn ran on thread %d, the thread taken for the main one was %d: want another", inner.Load(), outer.Load())
	}
}
