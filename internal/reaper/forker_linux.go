//go:build linux

package reaper

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/fdexec"
)

// forker is the one OS thread of this process that forks every child the
// package starts (providers, guardians, the watchdog), but for a
// sandboxed provider (and its PID-namespace init), which the thread that
// applied the sandbox forks (sandbox.Start) and then ends with, handing
// them to the main thread. A child's parent is
// the thread that forked it, and an orphan re-parented to this process (a
// child subreaper) goes to its first live thread, the main thread (kernel
// find_new_reaper/find_alive_thread). So every child a tree can have is
// listed in /proc/self/task/<forker>/children or
// /proc/self/task/<pid>/children, and central.children reads just those
// two files, not one per thread: a sidecar with 1000 sessions has hundreds
// of threads, and reading all their lists on every verification pass made
// a burst of closes quadratic.
type forker struct {
	tid  int
	reqs chan func()
	done chan struct{}
}

// newForker starts the forking thread (locked for its whole life).
func newForker() *forker {
	f := &forker{reqs: make(chan func()), done: make(chan struct{})}
	ready := make(chan int)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: when this goroutine ends the thread ends with it,
		// and its children move to the main thread's list.
		ready <- unix.Gettid()
		for fn := range f.reqs {
			fn()
		}
		close(f.done)
	}()
	f.tid = <-ready
	return f
}

// forkExec is fdexec.ForkExec on the forking thread.
func (f *forker) forkExec(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	var pid int
	var err error
	ran := make(chan struct{})
	f.reqs <- func() {
		pid, err = fdexec.ForkExec(path, argv, attr)
		close(ran)
	}
	<-ran
	return pid, err
}

// stop ends the forking thread.
func (f *forker) stop() {
	close(f.reqs)
	<-f.done
}

// children lists the direct children of this process that can belong to a
// tree: those on the forking thread's and the main thread's children
// lists (zombies included). A list read while it changes may miss an
// entry; callers repeat (sweepChildren).
func (c *central) children() []int {
	var out []int
	for _, tid := range []int{c.fork.tid, c.self} {
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/children")
		if err != nil {
			// No CONFIG_PROC_CHILDREN, or the thread is gone: every thread.
			return selfChildren(c.self)
		}
		for _, field := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(field); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}
