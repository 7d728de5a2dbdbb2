//go:build linux

package adapter

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A provider's stdout is read outside the Go runtime's poller: the
// runtime registers a pipe edge-triggered, and a pipe write signals it
// every time, so an agent writing one line per write(2) wakes a sidecar
// thread per line even while the read loop is not waiting for it. Here one
// sidecar-wide epoll instance holds every provider stdout in one-shot
// mode: a pipe is armed only when its reader found it empty, so it wakes
// the sidecar at most once per wait; and while the provider is streaming
// session/updates (the read loop's last message was one, and data came
// within streamGap) an empty read first sleeps coalesceWait on a Go timer,
// the pipe disarmed, so what the agent writes meanwhile is taken by one
// read(2) and handed to the actor as one batch (docs/architecture.md,
// "Update path"). The cost is up to ~1–2 ms of added latency per batch
// during a stream of updates only; a request or response line that ends a
// stream waits at most that once.

// Pacing of a streaming pipe.
const (
	streamGap    = 2 * time.Millisecond
	coalesceWait = 500 * time.Microsecond
)

// pipePoller is the shared epoll instance. Its loop runs while at least
// one pipe is registered and stops with the last (owned by the set of
// open pipeReaders).
type pipePoller struct {
	mu      sync.Mutex
	epfd    int
	evfd    int // eventfd: wakes the loop to stop
	readers map[int32]*pipeReader
	stopped chan struct{} // closed when the loop has ended
}

var sharedPoller pipePoller

// pipeReader reads one provider stdout pipe (non-blocking fd) through the
// shared poller. Read and Close may run concurrently; Read is called by
// one goroutine (the connection's read loop).
type pipeReader struct {
	fd       int
	ready    chan struct{} // one token: the pipe became readable
	closed   chan struct{}
	closeMu  sync.Once
	rmu      sync.Mutex // held around read(2): Close waits for it before close(2)
	lastData time.Time
	timer    *time.Timer
	// pacing: the read loop is taking session/updates (setPacing); only
	// then does an empty read wait coalesceWait first.
	pacing bool
}

// setPacing is called by the read loop (the goroutine that calls Read):
// true while it is taking a stream of session/updates, false once another
// message came, so requests and responses are never held back.
func (r *pipeReader) setPacing(on bool) { r.pacing = on }

// pollPipe moves r (a provider's stdout) to the shared poller: it
// duplicates its descriptor, closes r (which takes it out of the runtime's
// poller) and returns the reader of the duplicate. If r is not an *os.File
// or anything fails, r itself is returned.
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
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return r
	}
	pr := &pipeReader{fd: dup, ready: make(chan struct{}, 1), closed: make(chan struct{})}
	if err := sharedPoller.add(pr); err != nil {
		unix.Close(dup)
		return r
	}
	_ = f.Close()
	return pr
}

// add registers pr (disarmed), starting the loop if it is the first.
func (p *pipePoller) add(pr *pipeReader) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.readers == nil {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return err
		}
		evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			unix.Close(epfd)
			return err
		}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}); err != nil {
			unix.Close(epfd)
			unix.Close(evfd)
			return err
		}
		p.epfd, p.evfd, p.readers, p.stopped = epfd, evfd, map[int32]*pipeReader{}, make(chan struct{})
		go p.loop(epfd, evfd, p.stopped)
	}
	// Registered one-shot and disarmed: the first Read arms it.
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, pr.fd, &unix.EpollEvent{Events: unix.EPOLLONESHOT, Fd: int32(pr.fd)}); err != nil {
		if len(p.readers) == 0 {
			p.stopLocked()
		}
		return err
	}
	p.readers[int32(pr.fd)] = pr
	return nil
}

// arm asks for one wake-up when pr's pipe is readable (or hung up).
func (p *pipePoller) arm(pr *pipeReader) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.readers[int32(pr.fd)] != pr {
		return os.ErrClosed
	}
	return unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, pr.fd,
		&unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(pr.fd)})
}

// remove unregisters pr; the loop stops with the last reader.
func (p *pipePoller) remove(pr *pipeReader) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.readers[int32(pr.fd)] != pr {
		return
	}
	_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, pr.fd, nil)
	delete(p.readers, int32(pr.fd))
	if len(p.readers) == 0 {
		p.stopLocked()
	}
}

// stopLocked ends the loop (p.mu held); it closes the descriptors itself.
func (p *pipePoller) stopLocked() {
	var one [8]byte
	one[0] = 1 // host byte order on little-endian; any non-zero value wakes it
	_, _ = unix.Write(p.evfd, one[:])
	p.readers = nil
}

// loop waits in epoll_wait (a blocking system call: one thread for every
// provider pipe of the sidecar) and hands each readiness to its reader.
func (p *pipePoller) loop(epfd, evfd int, stopped chan struct{}) {
	defer close(stopped)
	defer unix.Close(evfd)
	defer unix.Close(epfd)
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(epfd, events, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		p.mu.Lock()
		for _, ev := range events[:n] {
			if int(ev.Fd) == evfd {
				p.mu.Unlock()
				return
			}
			if pr := p.readers[ev.Fd]; pr != nil {
				select {
				case pr.ready <- struct{}{}:
				default:
				}
			}
		}
		p.mu.Unlock()
	}
}

// Read reads what the pipe holds; when it is empty it waits (pacing a
// streaming pipe first, see above). It returns io.EOF once the write end
// is closed and the pipe drained, os.ErrClosed after Close.
func (r *pipeReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	paced := false
	for {
		n, err := r.read(b)
		switch {
		case n > 0:
			r.lastData = time.Now()
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
		if err := sharedPoller.arm(r); err != nil {
			return 0, os.ErrClosed
		}
		// A readiness already signalled (before the arm) is harmless:
		// the read after it finds EAGAIN and arms again.
		select {
		case <-r.ready:
		case <-r.closed:
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
		sharedPoller.remove(r)
		r.rmu.Lock()
		err = unix.Close(r.fd)
		r.rmu.Unlock()
	})
	return err
}
