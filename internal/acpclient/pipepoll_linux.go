//go:build linux

package acpclient

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A provider's stdout is read outside the Go runtime's own registration:
// the runtime registers a pipe edge-triggered, and a pipe write signals it
// every time, so an agent writing one line per write(2) wakes a sidecar
// thread per line even while the read loop is not waiting for it. Here
// each provider stdout is held by an epoll instance of its own in one-shot
// mode (armed only when its reader found the pipe empty, so it signals at
// most once per wait), and that epoll instance is what the runtime's
// poller watches: a Read that must wait parks its goroutine in the
// runtime's poller like any other file read, no thread is held in a
// blocking epoll_wait (which the runtime's monitor would keep retaking,
// waking itself every 20 µs for a while after each), and the read loop is
// woken directly, without a goroutine in between. While the provider is
// streaming session/updates (the read loop's last message was one, and
// data came within streamGap) an empty read first sleeps coalesceWait on a
// Go timer, the pipe disarmed, so what the agent writes meanwhile is taken
// by one read(2) and handed to the actor as one batch
// (docs/architecture.md, "Update path"); a read that emptied the pipe (it
// returned less than asked) makes the next Read sleep before its read(2)
// instead of after one that would find the pipe empty, so a batch costs
// one read(2). The cost is up to ~1–2 ms of added latency per batch
// during a stream of updates only (a sidecar with nothing else to run
// waits for a Go timer in whole milliseconds: the runtime's poller sleeps
// at least 1 ms for a shorter timer); a request or response line that
// ends a stream waits at most that once.

// Pacing of a streaming pipe.
const (
	streamGap    = 2 * time.Millisecond
	coalesceWait = 500 * time.Microsecond
)

// pipeReader reads one provider stdout pipe (non-blocking fd) through its
// own one-shot epoll instance (ep), which the runtime's poller watches.
// Read and Close may run concurrently; Read is called by one goroutine
// (the connection's read loop).
type pipeReader struct {
	fd       int
	ep       *os.File        // the epoll instance holding fd, in the runtime's poller
	epc      syscall.RawConn // ep's, for waiting on it
	closed   chan struct{}
	closeMu  sync.Once
	rmu      sync.Mutex // held around read(2): Close waits for it before close(2)
	lastData time.Time
	timer    *time.Timer
	events   [1]unix.EpollEvent
	// pacing: the read loop is taking session/updates (setPacing); only
	// then does an empty read wait coalesceWait first.
	pacing bool
	// drained: the last read returned less than asked, so the pipe was
	// empty after it (a pipe's read(2) returns all it holds up to the
	// size asked).
	drained bool
}

// setPacing is called by the read loop (the goroutine that calls Read):
// true while it is taking a stream of session/updates, false once another
// message came, so requests and responses are never held back.
func (r *pipeReader) setPacing(on bool) { r.pacing = on }

// pollPipe moves r (a provider's stdout) to an epoll instance of its own:
// it duplicates r's descriptor, closes r (which takes it out of the
// runtime's poller) and returns the reader of the duplicate. If r is not an
// *os.File or anything fails, r itself is returned.
func pollPipe(r io.ReadCloser) io.ReadCloser {
	f, ok := r.(*os.File)
	if !ok {
		return r
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return r
	}
	dup := -1
	if cerr := sc.Control(func(fd uintptr) {
		dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); cerr != nil || err != nil {
		return r
	}
	pr, err := newPipeReader(dup)
	if err != nil {
		unix.Close(dup)
		return r
	}
	_ = f.Close()
	return pr
}

// newPipeReader makes fd non-blocking and registers it, disarmed, with a
// new epoll instance that the runtime's poller watches.
func newPipeReader(fd int) (*pipeReader, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, err
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	// Registered one-shot and disarmed: the first Read that finds the pipe
	// empty arms it.
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLONESHOT, Fd: int32(fd)}); err != nil {
		unix.Close(epfd)
		return nil, err
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, err
	}
	ep := os.NewFile(uintptr(epfd), "epoll") // non-blocking: in the runtime's poller
	epc, err := ep.SyscallConn()
	if err != nil {
		ep.Close()
		return nil, err
	}
	return &pipeReader{fd: fd, ep: ep, epc: epc, closed: make(chan struct{})}, nil
}

// arm asks for one readiness of the pipe (readable or hung up) on ep.
func (r *pipeReader) arm() error {
	var err error
	if cerr := r.epc.Control(func(epfd uintptr) {
		err = unix.EpollCtl(int(epfd), unix.EPOLL_CTL_MOD, r.fd,
			&unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(r.fd)})
	}); cerr != nil {
		return cerr
	}
	return err
}

// wait parks the caller in the runtime's poller until ep reports the
// armed pipe ready (taking that one event), or ep is closed.
func (r *pipeReader) wait() error {
	return r.epc.Read(func(epfd uintptr) bool {
		for {
			n, err := unix.EpollWait(int(epfd), r.events[:], 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return n > 0 || err != nil
		}
	})
}

// Read reads what the pipe holds; when it is empty it waits (pacing a
// streaming pipe first, see above). It returns io.EOF once the write end
// is closed and the pipe drained, os.ErrClosed after Close.
func (r *pipeReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	paced := false
	if r.pacing && r.drained && time.Since(r.lastData) < streamGap {
		// The last read emptied the pipe (it returned less than asked):
		// pace now rather than after a read(2) that would only find it
		// empty again.
		paced = true
		if !r.sleep(coalesceWait) {
			return 0, os.ErrClosed
		}
	}
	for {
		n, err := r.read(b)
		switch {
		case n > 0:
			r.lastData = time.Now()
			r.drained = n < len(b)
			return n, nil
		case err == nil:
			return 0, io.EOF
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EAGAIN):
			return 0, err
		}
		if r.pacing && !paced && time.Since(r.lastData) < streamGap {
			paced = true
			if !r.sleep(coalesceWait) {
				return 0, os.ErrClosed
			}
			continue
		}
		if err := r.arm(); err != nil {
			return 0, os.ErrClosed
		}
		// Data that came between the empty read and the arm is reported
		// by the arm itself (epoll checks readiness when armed).
		if err := r.wait(); err != nil {
			return 0, os.ErrClosed
		}
		paced = true // data arrived after a wait: no pacing before it
	}
}

func (r *pipeReader) read(b []byte) (int, error) {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	select {
	case <-r.closed:
		return 0, os.ErrClosed
	default:
	}
	return unix.Read(r.fd, b)
}

// sleep waits d or until Close; false if closed.
func (r *pipeReader) sleep(d time.Duration) bool {
	if r.timer == nil {
		r.timer = time.NewTimer(d)
	} else {
		r.timer.Reset(d)
	}
	select {
	case <-r.timer.C:
		return true
	case <-r.closed:
		r.timer.Stop()
		return false
	}
}

// Close unregisters the pipe, wakes a waiting Read and closes the
// descriptor once no read(2) is in progress. Later calls do nothing.
func (r *pipeReader) Close() error {
	var err error
	r.closeMu.Do(func() {
		close(r.closed)
		_ = r.ep.Close() // wakes a waiting Read
		r.rmu.Lock()
		err = unix.Close(r.fd)
		r.rmu.Unlock()
	})
	return err
}
