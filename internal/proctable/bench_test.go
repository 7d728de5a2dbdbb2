//go:build linux

package proctable

import (
	"os"
	"testing"
)

// BenchmarkList: one read of the whole process table (what each
// process-table scan costs, without the environment reads).
func BenchmarkList(b *testing.B) {
	r, err := New()
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for i := 0; i < b.N; i++ {
		l, err := r.List()
		if err != nil {
			b.Fatal(err)
		}
		n = len(l)
	}
	b.ReportMetric(float64(n), "procs")
}

// BenchmarkEnviron: one environment read (done once per new process).
func BenchmarkEnviron(b *testing.B) {
	r, err := New()
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if _, err := r.Environ(os.Getpid()); err != nil {
			b.Fatal(err)
		}
	}
}
