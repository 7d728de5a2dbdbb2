package session

import (
	"testing"
	"time"
)

// TestStats_Percentiles: p50/p99 are nearest-rank over the last 1024
// close samples; the ring forgets older ones.
func TestStats_Percentiles(t *testing.T) {
	var st Stats
	if p := st.percentiles(); p.P50 != 0 || p.P99 != 0 {
		t.Fatalf("no samples: %+v", p)
	}
	for i := 1; i <= 100; i++ {
		st.sampleClose(time.Duration(i) * time.Millisecond)
	}
	if p := st.percentiles(); p.P50 != 50 || p.P99 != 99 {
		t.Fatalf("1..100 ms: %+v, want p50 50 p99 99", p)
	}
	for i := 0; i < closeSamples; i++ {
		st.sampleClose(time.Second)
	}
	if p := st.percentiles(); p.P50 != 1000 || p.P99 != 1000 {
		t.Fatalf("after %d samples of 1 s: %+v", closeSamples, p)
	}
	st.countTurn("completed")
	st.countTurn("cancelled")
	st.countTurn("failed")
	if st.completed.Load() != 1 || st.cancelled.Load() != 1 || st.failed.Load() != 1 {
		t.Fatal("turn counters")
	}
}
