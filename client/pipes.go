package client

import (
	"os"
	"sync"
)

// pipes is the host end of the sidecar's stdio: reads come from its
// stdout, writes go to its stdin. Close closes both, once.
type pipes struct {
	r      *os.File
	w      *os.File
	once   sync.Once
	inOnce sync.Once
}

func (p *pipes) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipes) Write(b []byte) (int, error) { return p.w.Write(b) }

// Close implements io.Closer.
func (p *pipes) Close() error {
	p.once.Do(func() { _ = p.closeInput(); _ = p.r.Close() })
	return nil
}

// closeInput closes the sidecar's stdin only, once.
func (p *pipes) closeInput() error {
	var err error
	p.inOnce.Do(func() { err = p.w.Close() })
	return err
}

// queue runs funcs one at a time, in the order they were pushed, on its own
// goroutine; push never blocks, so the read loop never waits on a slow
// callback.
type queue struct {
	mu     sync.Mutex
	items  []func()
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

func newQueue() *queue {
	q := &queue{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

func (q *queue) push(f func()) {
	q.mu.Lock()
	if !q.closed {
		q.items = append(q.items, f)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close lets the queue finish what it holds, then stop; wait on q.done.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		items, closed := q.items, q.closed
		q.items = nil
		q.mu.Unlock()
		for _, f := range items {
			f()
		}
		if len(items) == 0 {
			if closed {
				return
			}
			<-q.wake
		}
	}
}
