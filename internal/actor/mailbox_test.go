package actor

import (
	"sync/atomic"
	"testing"
)

// TestMailbox_CommandsOfAStoppedActorAreAnswered: put never blocks, and
// the commands the actor never ran are handed back to be answered.
func TestMailbox_CommandsOfAStoppedActorAreAnswered(t *testing.T) {
	mb := NewMailbox()
	var answered atomic.Int32
	for i := 0; i < 10000; i++ {
		if !mb.Put(func(any, error) { answered.Add(1) }, func() {}) {
			t.Fatal("put refused before close")
		}
	}
	if mb.Take() == nil {
		t.Fatal("nothing to take")
	}
	replies := mb.Close()
	if len(replies) != 9999 {
		t.Fatalf("%d replies handed back, want 9999", len(replies))
	}
	if mb.Put(func(any, error) {}, func() {}) {
		t.Fatal("put accepted after close")
	}
}
