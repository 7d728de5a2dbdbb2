//go:build linux

package reaper

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkStartTerminate measures one launch + cooperative termination.
func BenchmarkStartTerminate(b *testing.B) {
	for _, mode := range []Mode{ModeCgroup, ModeProcessGroup} {
		b.Run(string(mode), func(b *testing.B) {
			s, err := newSupervisor(Options{Mode: mode})
			if err != nil {
				b.Skip(err)
			}
			defer s.Close()
			for b.Loop() {
				tr, err := s.Start(Spec{Path: "/bin/sleep", Args: []string{"1000"}, Env: []string{"PATH=/usr/bin:/bin"}})
				if err != nil {
					b.Fatal(err)
				}
				if r := tr.Terminate(context.Background(), 2*time.Second, 2*time.Second); !r.Complete {
					b.Fatalf("incomplete: %+v", r)
				}
				tr.Stdin().Close()
				tr.Stdout().Close()
				tr.Stderr().Close()
			}
		})
	}
}

// BenchmarkCooperativeClose measures close → proof in cgroup mode for a
// provider that exits on stdin EOF (as an ACP agent does): stdin is
// closed, then Terminate runs; reported as the median (ms/close-p50) and
// mean (ns/op) of Terminate's time.
func BenchmarkCooperativeClose(b *testing.B) {
	s, err := newSupervisor(Options{Mode: ModeCgroup})
	if err != nil {
		b.Skip(err)
	}
	defer s.Close()
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		tr, err := s.Start(Spec{Path: "/bin/cat", Env: []string{"PATH=/usr/bin:/bin"}})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		tr.Stdin().Close()
		if r := tr.Terminate(context.Background(), 2*time.Second, 2*time.Second); !r.Complete {
			b.Fatalf("incomplete: %+v", r)
		}
		lat = append(lat, time.Since(start))
		b.StopTimer()
		tr.Stdout().Close()
		tr.Stderr().Close()
		b.StartTimer()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms/close-p50")
}
