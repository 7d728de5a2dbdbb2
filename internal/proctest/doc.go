// Package proctest is for tests that start real processes and must prove
// none survives them: an environment carrying a fresh marker
// (internal/testmark), the scan of /proc for live processes carrying it,
// bounded waits on what /proc shows, and reading a tree's stdout with a
// deadline. Every wait is bounded; none sleeps and hopes. Tests only; Linux (it reads /proc).
package proctest
