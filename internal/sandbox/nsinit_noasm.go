//go:build linux && !amd64

package sandbox

// elfMachine is unused without an init program for this architecture.
const elfMachine = 0

// nsinitCode is nil: this architecture has no init program of raw
// system calls, and a PID namespace's init is the sidecar's own image
// (InitCommand's fallback, InitMain).
func nsinitCode() []byte { return nil }
