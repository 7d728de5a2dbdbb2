//go:build linux || darwin

package tablemode

import (
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
)

// envTries is how many failed reads of one process's environment are made
// before it counts as carrying no marker: a read fails for a moment while a
// process forks or execs (Darwin EIO; Linux reads an empty environment
// while execve replaces the memory, so an empty one counts as failed too),
// and for good for another user's process (Darwin EINVAL, Linux EACCES),
// which must not be re-read on every scan.
const envTries = 3

// envWait bounds how long a scan waits for the environment reads it
// started; reads still running then are used by a later scan.
const envWait = 50 * time.Millisecond

// envWorkers is how many environment reads run at once.
const envWorkers = 4

// envReader reads processes' environments for their marker entry, off the
// scan's path: a read can block for as long as the target holds its memory
// lock (Linux /proc/<pid>/environ takes the target's mmap_lock, which a
// process tearing down a large heap, or stuck in a page fault on a dead
// mount, holds; Darwin KERN_PROCARGS2 copies from the target's address
// space), and one stuck read must not stall every close. envWorkers
// goroutines do the reads; a scan waits at most envWait for them. Results
// are kept per pid and start time until the process leaves the table.
type envReader struct {
	procs proctable.Reader
	log   *zap.Logger
	jobs  chan tableKey
	wake  chan struct{} // a read finished (capacity 1)
	stop  chan struct{}
	wg    sync.WaitGroup

	mu    sync.Mutex
	names []string // the "NAME=" prefixes the results are for
	reads map[tableKey]*envRead
}

// envRead is what is known of one process's environment.
type envRead struct {
	entry string // the marker entry found ("" none)
	fails int    // failed reads so far
	done  bool   // entry is final (read, or envTries failures)
	busy  bool   // a read is queued or running
}

// newEnvReader starts the workers; close stops them.
func newEnvReader(procs proctable.Reader, log *zap.Logger) *envReader {
	r := &envReader{procs: procs, log: log, jobs: make(chan tableKey, 1024), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), reads: map[tableKey]*envRead{}}
	for i := 0; i < envWorkers; i++ {
		r.wg.Add(1)
		go r.work()
	}
	return r
}

func (r *envReader) work() {
	defer r.wg.Done()
	for {
		select {
		case <-r.stop:
			return
		case k := <-r.jobs:
			env, err := r.procs.Environ(k.pid)
			r.mu.Lock()
			if e := r.reads[k]; e != nil {
				e.busy = false
				if err != nil || len(env) == 0 {
					e.fails++
					e.done = e.fails >= envTries
				} else {
					e.entry, e.done = markerEntry(env, r.names), true
				}
			}
			r.mu.Unlock()
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
}

// close stops the workers, waiting up to 1 s (a worker stuck in a read
// that never returns cannot be stopped; it is logged and left).
func (r *envReader) close() {
	close(r.stop)
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		r.log.Warn("reaper: an environment read is still blocked in the kernel at close")
	}
}

// marked starts a read of every live process of s not read yet, waits up
// to wait for the reads of s's processes, and returns, per tree of
// markers, the pids whose entry for one of the "NAME=" prefixes names is
// that tree's marker. Results of processes gone from s are dropped; a new
// set of names drops every result.
func (r *envReader) marked(s *tableScan, markers func(entry string) *Tree, names []string, wait time.Duration) map[*Tree][]int {
	out := map[*Tree][]int{}
	if len(names) == 0 {
		return out
	}
	r.mu.Lock()
	if strings.Join(names, "\x00") != strings.Join(r.names, "\x00") {
		r.names = append([]string(nil), names...)
		for k, e := range r.reads {
			if !e.busy {
				delete(r.reads, k)
			}
		}
	}
	for k, e := range r.reads {
		if p, ok := s.procs[k.pid]; (!ok || p.Start != k.start) && !e.busy {
			delete(r.reads, k)
		}
	}
	pending := r.startLocked(s)
	r.mu.Unlock()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for pending > 0 {
		select {
		case <-r.wake:
		case <-deadline.C:
			pending = 0
			continue
		}
		r.mu.Lock()
		pending = r.pendingLocked(s)
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid, p := range s.procs {
		if e := r.reads[tableKey{pid, p.Start}]; e != nil && e.done && e.entry != "" {
			if t := markers(e.entry); t != nil {
				out[t] = append(out[t], pid)
			}
		}
	}
	return out
}

// startLocked queues a read for every live process of s that needs one and
// returns how many of s's reads are outstanding (r.mu held). A full queue
// leaves the rest for a later scan.
func (r *envReader) startLocked(s *tableScan) int {
	for pid, p := range s.procs {
		if p.Zombie {
			continue
		}
		k := tableKey{pid, p.Start}
		e := r.reads[k]
		if e == nil {
			e = &envRead{}
			r.reads[k] = e
		}
		if e.done || e.busy {
			continue
		}
		select {
		case r.jobs <- k:
			e.busy = true
		default:
		}
	}
	return r.pendingLocked(s)
}

// pendingLocked counts the reads of s's processes still queued or running.
func (r *envReader) pendingLocked(s *tableScan) int {
	n := 0
	for pid, p := range s.procs {
		if e := r.reads[tableKey{pid, p.Start}]; e != nil && e.busy {
			n++
		}
	}
	return n
}

// markerEntry returns the first entry of env that starts with one of the
// "NAME=" prefixes, or "".
func markerEntry(env []string, prefixes []string) string {
	for _, e := range env {
		for _, p := range prefixes {
			if strings.HasPrefix(e, p) {
				return e
			}
		}
	}
	return ""
}
