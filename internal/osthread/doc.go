// Package osthread runs work that changes its OS thread for good — a
// Landlock domain, dropped capabilities, a seccomp filter, unshared
// namespaces — on a thread that is never the process's main thread.
//
// A goroutine locked to its thread (runtime.LockOSThread) that ends
// without unlocking takes the thread with it, except the main thread,
// which the Go runtime cannot end and parks instead. The main thread is
// also the thread-group leader: the task a kill(2) of the process, a
// Landlock signal scope and a pidfd are checked against. A sandbox set
// up on it would leave the sidecar's process carrying the agent's Landlock
// domain, so the agent could signal the sidecar (docs/protocol.md §19;
// seen once under load by a test of the sandbox). The sidecar does not
// lock its main goroutine to the main thread instead: its main goroutine
// serves the host, and a locked goroutine costs a thread hand-off at
// every wake-up.
//
// It imports only golang.org/x/sys/unix.
package osthread
