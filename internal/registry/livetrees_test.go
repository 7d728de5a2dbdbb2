package registry

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLiveTrees_FIFOAndBounded: with one slot, waiters are served in
// arrival order as slots are given back, and a wait that runs out is
// ErrNoLiveTreeSlot without taking a slot.
func TestLiveTrees_FIFOAndBounded(t *testing.T) {
	lt := NewLiveTrees(1)
	if err := lt.Acquire(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if err := lt.Acquire(context.Background(), 10*time.Millisecond); !errors.Is(err, ErrNoLiveTreeSlot) {
		t.Fatalf("second acquire: %v, want ErrNoLiveTreeSlot", err)
	}
	order := make(chan int, 3)
	for i := 0; i < 3; i++ {
		i := i
		go func() {
			if lt.Acquire(context.Background(), time.Minute) == nil {
				order <- i
			}
		}()
		// each waiter queued before the next starts
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, w := lt.Counts(); w == i+1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	for want := 0; want < 3; want++ {
		lt.Release()
		if got := <-order; got != want {
			t.Fatalf("slot went to waiter %d, want %d (FIFO)", got, want)
		}
	}
	lt.Release()
	if live, waiting := lt.Counts(); live != 0 || waiting != 0 {
		t.Errorf("after every release: live %d waiting %d", live, waiting)
	}
}
