// Package proctable reads the operating system's process table: every
// process with its parent, process group and start time, and one process's
// environment as it was laid out at its execve. It is the one place the
// process-table containment (internal/reaper, ModeProcessTable; docs/operations.md,
// "macOS") looks at processes, so the same algorithm runs over two readers:
//
//   - Linux: /proc/<pid>/stat (fields 3, 4, 5, 22) and /proc/<pid>/environ;
//   - Darwin: sysctl KERN_PROC_ALL / KERN_PROC_PID (struct kinfo_proc:
//     p_pid, e_ppid, e_pgid, p_stat, p_starttime) and KERN_PROCARGS2 (argc,
//     the executable path, argv, then the environment), through
//     golang.org/x/sys/unix. The Darwin reader is compiled and vetted for
//     darwin/arm64 and darwin/amd64 by `make test`; this project's CI runs
//     on Linux only, so it is not run there (its KERN_PROCARGS2 parser is:
//     procargs2.go is built everywhere and tested on Linux).
//
// A table read is not atomic on either system: processes that fork or exit
// while it is read may be missing or already gone. Callers that need a
// fact to hold read twice (the containment's "two scans a reap cycle
// apart").
package proctable

import "errors"

// Proc is one process-table entry.
type Proc struct {
	// Pid, PPid and Pgid are the process id, its parent's and its process
	// group's.
	Pid, PPid, Pgid int
	// Start is the process's start time, the half of its identity that a
	// recycled pid does not share: on Linux clock ticks since boot
	// (/proc/<pid>/stat field 22), on Darwin microseconds since the Unix
	// epoch (kinfo_proc p_starttime). Compare it only with values from the
	// same Reader on the same machine.
	Start uint64
	// Zombie is true for a process that has exited and waits to be reaped
	// (Linux state 'Z' with no thread left but the leader's, Darwin SZOMB):
	// it runs nothing any more.
	Zombie bool
}

// Reader reads the process table. The readers of this package are safe for
// concurrent use.
type Reader interface {
	// List returns every process in the table, in no particular order
	// (processes that appear or vanish during the read may be missed).
	// Errors: the table cannot be read at all (no /proc, sysctl failure).
	List() ([]Proc, error)
	// Stat returns one process; ErrNotFound (wrapped or not) when pid
	// names no process.
	Stat(pid int) (Proc, error)
	// Environ returns pid's environment as "NAME=value" entries, as laid
	// out at its last execve (a process's later setenv/unsetenv in its own
	// memory may or may not show). ErrNotFound when pid is gone; another
	// error when it cannot be read (another user's process, a zombie, a
	// process mid-exec). On Darwin the list also holds the kernel's
	// "apple" strings (executable_path=…), which look like entries;
	// callers match exact entries, so they are harmless.
	Environ(pid int) ([]string, error)
}

// ErrNotFound is returned by Reader.Stat and Reader.Environ for a pid that
// names no process.
var ErrNotFound = errors.New("proctable: no such process")

// ErrUnsupported is returned by New on a system without a reader.
var ErrUnsupported = errors.New("proctable: no process-table reader for this operating system")

// HasEntry reports whether env holds exactly the entry "NAME=value".
func HasEntry(env []string, entry string) bool {
	for _, e := range env {
		if e == entry {
			return true
		}
	}
	return false
}

// StartTime is live process pid's start time (Proc.Start: clock ticks
// since boot), what a ledger entry records of the sidecar that wrote it;
// false for a process that is gone or a zombie, or where there is no
// process table.
func StartTime(pid int) (uint64, bool) {
	r, err := New()
	if err != nil {
		return 0, false
	}
	p, err := r.Stat(pid)
	if err != nil || p.Zombie {
		return 0, false
	}
	return p.Start, true
}
