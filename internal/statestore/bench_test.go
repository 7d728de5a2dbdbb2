package statestore

// runChild is the benchmark's child-process entry (see BenchmarkRoundTrip);
// false in an ordinary test process.
func runChild() bool { return false }
