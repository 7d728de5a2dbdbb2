package acpclient

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestOutbox_WritesNeverBlockOnAnAgentThatDoesNotRead: with nobody reading
// the pipe, writes return at once until the queue's bound, then fail with
// ErrAgentHung, the agent is found hung once, and Close ends the writer
// (docs/protocol.md §20).
func TestOutbox_WritesNeverBlockOnAnAgentThatDoesNotRead(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var hung atomic.Int32
	o := newOutbox(w, 1<<20, time.Hour, func(why error) {
		if errors.Is(why, ErrAgentHung) {
			hung.Add(1)
		}
	})
	done := make(chan error, 1)
	go func() {
		frame := []byte(strings.Repeat("x", 1000) + "\n")
		for i := 0; i < 100000; i++ {
			if _, err := o.Write(frame); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrAgentHung) {
			t.Fatalf("writes past the bound: %v, want ErrAgentHung", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write blocked on an agent that does not read")
	}
	if hung.Load() != 1 || !o.stalled(time.Hour) {
		t.Fatalf("hung reported %d times, stalled %v", hung.Load(), o.stalled(time.Hour))
	}
	if _, err := o.Write([]byte("y\n")); !errors.Is(err, ErrAgentHung) {
		t.Fatalf("write after hung: %v", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Write([]byte("z\n")); !errors.Is(err, errOutboxClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

// TestOutbox_AWriteThatTakesNoByteIsHungAtTheDeadline: a chunk the pipe
// does not take within the write timeout marks the agent hung; before
// that, stalled(d) reports the write in progress.
func TestOutbox_AWriteThatTakesNoByteIsHungAtTheDeadline(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	hung := make(chan struct{})
	o := newOutbox(w, 0, 200*time.Millisecond, func(why error) {
		if errors.Is(why, os.ErrDeadlineExceeded) {
			close(hung)
		}
	})
	defer o.Close()
	if _, err := o.Write(make([]byte, 4<<20)); err != nil { // far more than a pipe holds
		t.Fatal(err)
	}
	select {
	case <-hung:
	case <-time.After(30 * time.Second):
		t.Fatal("a write that took nothing for its deadline did not mark the agent hung")
	}
	if !o.stalled(0) {
		t.Fatal("hung agent not reported stalled")
	}
}
