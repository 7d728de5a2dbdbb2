package stats

import (
	"testing"
	"time"
)

// TestCounters_Percentiles: p50/p99 are nearest-rank over the last 1024
// close samples; the ring forgets older ones.
func TestCounters_Percentiles(t *testing.T) {
	var st Counters
	if p := st.percentiles(); p.P50 != 0 || p.P99 != 0 {
		t.Fatalf("no samples: %+v", p)
	}
	for i := 1; i <= 100; i++ {
		st.SampleClose(time.Duration(i) * time.Millisecond)
	}
	if p := st.percentiles(); p.P50 != 50 || p.P99 != 99 {
		t.Fatalf("1..100 ms: %+v, want p50 50 p99 99", p)
	}
	for i := 0; i < closeSamples; i++ {
		st.SampleClose(time.Second)
	}
	if p := st.percentiles(); p.P50 != 1000 || p.P99 != 1000 {
		t.Fatalf("after %d samples of 1 s: %+v", closeSamples, p)
	}
	st.CountTurn("completed")
	st.CountTurn("cancelled")
	st.CountTurn("failed")
	if st.completed.Load() != 1 || st.cancelled.Load() != 1 || st.failed.Load() != 1 {
		t.Fatal("turn counters")
	}
}
