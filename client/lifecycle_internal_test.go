package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

// waiting reports how many WaitLifecycle calls wait on session.
func (c *Client) waiting(session string) int {
	c.subs.mu.Lock()
	defer c.subs.mu.Unlock()
	if w := c.subs.life[session]; w != nil {
		return w.waiters
	}
	return 0
}

// TestWaitLifecycleWatch: the watch the read loop keeps per session
// (onLifecycle, endLifecycle) without a sidecar: a wait returns at once
// for the latest state, waits for a later one, ignores other states and
// sessions, fails SESSION_ENDED when the session ends meanwhile and
// CANCELLED with its ctx, and leaves no entry behind for a session that
// never had a notice.
func TestWaitLifecycleWatch(t *testing.T) {
	c := &Client{subs: subscribers{life: map[string]*lifeWatch{}}, proc: sidecarProcess{done: make(chan struct{})}}
	s := c.Attach("s-1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	note := func(session string, st LifecycleState) {
		c.onLifecycle(LifecycleNotice{Session: session, SessionKey: "k", State: st})
	}
	untilWaiting := func(session string) {
		t.Helper()
		for c.waiting(session) == 0 {
			if ctx.Err() != nil {
				t.Fatal("the wait never began")
			}
			time.Sleep(time.Millisecond)
		}
	}

	type answer struct {
		n   *LifecycleNotice
		err error
	}
	wait := func(sess *Session, st LifecycleState) chan answer {
		ch := make(chan answer, 1)
		go func() {
			n, err := sess.WaitLifecycle(ctx, st)
			ch <- answer{n, err}
		}()
		return ch
	}

	got := wait(s, LifecycleParked)
	untilWaiting("s-1")
	note("s-2", LifecycleParked)   // another session
	note("s-1", LifecycleReviving) // another state
	note("s-1", LifecycleParked)
	if a := <-got; a.err != nil || a.n.State != LifecycleParked || a.n.Session != "s-1" {
		t.Fatalf("wait for parked: %+v, %v", a.n, a.err)
	}
	if n, err := s.WaitLifecycle(ctx, LifecycleParked); err != nil || n.State != LifecycleParked {
		t.Fatalf("wait for the latest state: %+v, %v", n, err)
	}
	if n := s.Lifecycle(); n == nil || n.State != LifecycleParked {
		t.Fatalf("Lifecycle = %+v", n)
	}

	got = wait(s, LifecycleLive)
	untilWaiting("s-1")
	c.endLifecycle("s-1")
	var ce *Error
	if a := <-got; !errors.As(a.err, &ce) || ce.DataCode != DataCodeSessionEnded {
		t.Fatalf("wait across the session's end: %+v, %v", a.n, a.err)
	}
	if n := s.Lifecycle(); n != nil {
		t.Fatalf("Lifecycle after the end = %+v", n)
	}

	short, stop := context.WithCancel(ctx)
	stop()
	if _, err := c.Attach("s-3").WaitLifecycle(short, LifecycleParked); !errors.As(err, &ce) || ce.DataCode != DataCodeCancelled {
		t.Fatalf("wait with an ended ctx: %v", err)
	}
	c.subs.mu.Lock()
	_, left := c.subs.life["s-3"]
	_, kept := c.subs.life["s-2"]
	c.subs.mu.Unlock()
	if left || !kept {
		t.Fatalf("watches: s-3 left %v (want false), s-2 kept %v (want true)", left, kept)
	}

	got = wait(c.Attach("s-2"), LifecycleLive)
	untilWaiting("s-2")
	c.endLifecycle("") // shutdown: every session
	if a := <-got; !errors.As(a.err, &ce) || ce.DataCode != DataCodeSessionEnded {
		t.Fatalf("wait across shutdown: %+v, %v", a.n, a.err)
	}
	close(c.proc.done)
	if _, err := c.Attach("s-4").WaitLifecycle(ctx, LifecycleParked); !errors.As(err, &ce) || ce.DataCode != DataCodeTransport {
		t.Fatalf("wait after the sidecar exited: %v", err)
	}
}
