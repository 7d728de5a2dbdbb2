package acpclient

import (
	"errors"
	"io"
	"sync"
	"time"
)

// No write to an agent blocks the actor or the host's read loop
// (docs/protocol.md, "Threat model"): every frame for a provider's stdin
// goes through its outbox, a bounded queue that one writer goroutine
// drains into the pipe. An agent that stops reading its stdin fills the
// pipe and then the queue; the queue's bound and the writer's per-chunk
// deadline turn that into an error on the writing side (the frame is not
// sent) instead of a goroutine stuck in write(2), and mark the agent hung:
// its close skips ACP session/close and goes straight to termination
// (internal/session/close.go).

// Outbound bounds of one provider's stdin.
const (
	// MaxOutboundBytes bounds the bytes queued for one agent's stdin. A
	// frame that would take the queue past it is refused and the agent is
	// hung. One frame of any size is taken when nothing is queued (a
	// prompt is bounded by the host's --max-frame-bytes).
	MaxOutboundBytes = 16 << 20
	// AgentWriteTimeout bounds one chunk's write(2) to an agent's stdin:
	// an agent that takes no byte of a chunk for this long is hung.
	AgentWriteTimeout = 30 * time.Second
	// outboxChunk is the most one write(2) is given, so the deadline
	// measures progress rather than the size of a frame.
	outboxChunk = 64 << 10
)

// ErrAgentHung is the error of a write to an agent that stopped reading
// its stdin (the outbox overflowed or a write ran past AgentWriteTimeout).
var ErrAgentHung = errors.New("the agent is not reading its stdin")

// errOutboxClosed is the error of a write after Close.
var errOutboxClosed = errors.New("the agent's stdin is closed")

// outbox is an io.WriteCloser over a provider's stdin whose Write never
// blocks: it copies p into the queue and returns. Its writer goroutine is
// started by newOutbox and ends at Close (closing the pipe ends a write in
// progress) or at the first write error.
type outbox struct {
	w       io.WriteCloser
	max     int
	timeout time.Duration

	mu        sync.Mutex
	q         []byte    // queued bytes, in order
	busySince time.Time // when the write in progress began (zero: none)
	hung      bool      // overflowed or timed out: every later Write fails
	closed    bool
	wake      chan struct{} // one token: q became non-empty, or Close
	done      chan struct{} // closed when the writer goroutine has ended
	onHung    func(error)   // called once, off the lock, when hung is set
}

// newOutbox starts the writer of w. max ≤ 0 means MaxOutboundBytes,
// timeout ≤ 0 AgentWriteTimeout; onHung (may be nil) is called once when
// the agent is found hung, with why: ErrAgentHung for an overflow, else
// the write's error (os.ErrDeadlineExceeded for a stalled write, EPIPE
// for an agent that closed its stdin).
func newOutbox(w io.WriteCloser, max int, timeout time.Duration, onHung func(why error)) *outbox {
	if max <= 0 {
		max = MaxOutboundBytes
	}
	if timeout <= 0 {
		timeout = AgentWriteTimeout
	}
	o := &outbox{w: w, max: max, timeout: timeout, wake: make(chan struct{}, 1), done: make(chan struct{}), onHung: onHung}
	go o.run()
	return o
}

// Write queues a copy of p. It returns ErrAgentHung when the agent is
// hung (and makes it so when p would take the queue past its bound) and
// errOutboxClosed after Close; it never blocks on the pipe.
func (o *outbox) Write(p []byte) (int, error) {
	o.mu.Lock()
	switch {
	case o.closed:
		o.mu.Unlock()
		return 0, errOutboxClosed
	case o.hung:
		o.mu.Unlock()
		return 0, ErrAgentHung
	case len(o.q) > 0 && len(o.q)+len(p) > o.max:
		o.setHungLocked(ErrAgentHung)
		return 0, ErrAgentHung
	}
	o.q = append(o.q, p...)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// setHungLocked marks the agent hung (why), drops the queue and unlocks.
func (o *outbox) setHungLocked(why error) {
	first := !o.hung
	o.hung, o.q = true, nil
	o.mu.Unlock()
	if first && o.onHung != nil {
		o.onHung(why)
	}
}

// stalled reports whether the agent is hung, or a write to it has taken
// no byte for at least d: a frame queued now would not reach it within d.
func (o *outbox) stalled(d time.Duration) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hung || !o.busySince.IsZero() && time.Since(o.busySince) >= d
}

// Close closes the pipe (a write in progress ends with an error) and
// waits for the writer goroutine. Idempotent.
func (o *outbox) Close() error {
	o.mu.Lock()
	already := o.closed
	o.closed = true
	o.mu.Unlock()
	if already {
		<-o.done
		return nil
	}
	err := o.w.Close()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	<-o.done
	return err
}

// run drains the queue into the pipe, outboxChunk bytes per write(2),
// each under the write deadline when the pipe supports one.
func (o *outbox) run() {
	defer close(o.done)
	dl, _ := o.w.(interface{ SetWriteDeadline(time.Time) error })
	var buf []byte
	for range o.wake {
		for {
			o.mu.Lock()
			if o.closed || o.hung || len(o.q) == 0 {
				closed := o.closed
				o.mu.Unlock()
				if closed {
					return
				}
				break
			}
			n := min(len(o.q), outboxChunk)
			buf = append(buf[:0], o.q[:n]...)
			o.q = o.q[n:]
			if len(o.q) == 0 {
				o.q = nil // do not keep a burst's array
			}
			o.busySince = time.Now()
			o.mu.Unlock()
			if dl != nil {
				_ = dl.SetWriteDeadline(time.Now().Add(o.timeout))
			}
			_, err := o.w.Write(buf)
			o.mu.Lock()
			o.busySince = time.Time{}
			if err != nil {
				if o.closed {
					o.mu.Unlock()
					return
				}
				// Timed out (or the agent closed its stdin): nothing more
				// can be delivered in frame order; the agent is hung.
				o.setHungLocked(err)
				return
			}
			o.mu.Unlock()
		}
	}
}
