package e2e

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestCapacity_ClosedSessionsReleaseTheirDescriptors: open and close a
// session eight times beside one that stays open; after each close the
// sidecar's descriptor table returns to what it held with the one session
// (waited for with a deadline: the stderr drain closes its end once it
// reads EOF), so a host retrying after a close at the descriptor limit is
// admitted (docs/protocol.md §21). The stderr pipe had been left for a GC
// finalizer: one descriptor more per cycle, for minutes.
func TestCapacity_ClosedSessionsReleaseTheirDescriptors(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	fds := func() int {
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(s.c.Process().Pid) + "/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	keep := e.open(s, "fd-keep", "")
	var base int
	for i := 0; i < 8; i++ {
		o := e.open(s, "fd-"+strconv.Itoa(i), "")
		s.mustCall("session/close", map[string]any{"session": o.Session}, nil) // keep's agent still runs: no closeClean here
		deadline := time.Now().Add(10 * time.Second)
		for got := fds(); i > 0 && got > base; got = fds() {
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: the sidecar holds %d descriptors, %d after the first close", i, got, base)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if i == 0 {
			base = fds()
		}
	}
	closeClean(t, s, keep.Session, e.mark, e.work)
}
