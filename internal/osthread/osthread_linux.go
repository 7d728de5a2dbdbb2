package osthread

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// RunLockedOffMain runs fn on a goroutine locked to an OS thread that is
// not the process's main thread, and waits for it. The thread is never
// unlocked: it ends with fn's goroutine, whatever fn did to it. fn must
// not call runtime.UnlockOSThread.
func RunLockedOffMain(fn func()) {
	runOffMain(fn, onMainThread)
}

// onMainThread reports whether the calling thread is the main thread
// (its thread id is the process id).
func onMainThread() bool { return unix.Gettid() == unix.Getpid() }

// runOffMain is RunLockedOffMain with the main-thread test given (tests
// force the case the scheduler rarely shows).
func runOffMain(fn func(), onMain func() bool) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if !onMain() {
			defer close(done) // the thread ends with this goroutine
			fn()
			return
		}
		// The main thread: held here, it cannot be given to the
		// goroutine below, which therefore runs on another thread; it
		// is handed back untouched once that one is done.
		inner := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			defer close(inner)
			fn()
		}()
		<-inner
		runtime.UnlockOSThread()
		close(done)
	}()
	<-done
}
