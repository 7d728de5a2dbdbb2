// Package testmark makes the environment markers tests give the processes
// they start (leaks are found by marker, not by name). Every marker
// starts with the run prefix from ACPX_TEST_RUN (set by `make test`), so the
// Makefile's leak check looks only at this run's processes, not at another
// run's on the same machine.
package testmark

import (
	"crypto/rand"
	"encoding/hex"
	"os"
)

// RunEnv names the environment variable holding the run prefix.
const RunEnv = "ACPX_TEST_RUN"

// Env is the environment variable tests put the marker in.
const Env = "ACPX_TEST_MARK"

// New returns a fresh marker value: "<run prefix>-<16 hex digits>", or
// just the hex digits when no run prefix is set.
func New() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if run := os.Getenv(RunEnv); run != "" {
		return run + "-" + hex.EncodeToString(b[:])
	}
	return hex.EncodeToString(b[:])
}
