//go:build darwin

package proctable

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// sZOMB is p_stat of a zombie (<sys/proc.h> SZOMB).
const sZOMB = 5

// New returns the sysctl reader. Errors: KERN_PROC_PID of this process
// cannot be read (ErrUnsupported, wrapped).
func New() (Reader, error) {
	if _, err := unix.SysctlKinfoProc("kern.proc.pid", unix.Getpid()); err != nil {
		return nil, fmt.Errorf("%w: sysctl kern.proc.pid: %v", ErrUnsupported, err)
	}
	return sysctlReader{}, nil
}

// sysctlReader reads the process table through sysctl(3).
type sysctlReader struct{}

// List reads KERN_PROC_ALL (one struct kinfo_proc per process; the slice
// is re-read if the table grew between the size probe and the read).
func (sysctlReader) List() ([]Proc, error) {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, fmt.Errorf("proctable: sysctl kern.proc.all: %w", err)
	}
	out := make([]Proc, 0, len(kps))
	for i := range kps {
		if kps[i].Proc.P_pid > 0 {
			out = append(out, fromKinfo(&kps[i]))
		}
	}
	return out, nil
}

// Stat reads KERN_PROC_PID; a pid with no process returns no entry
// (unix.SysctlKinfoProc reports that as EIO) or ESRCH.
func (sysctlReader) Stat(pid int) (Proc, error) {
	if pid <= 0 {
		return Proc{}, ErrNotFound
	}
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		if errors.Is(err, unix.EIO) || errors.Is(err, unix.ESRCH) {
			return Proc{}, ErrNotFound
		}
		return Proc{}, fmt.Errorf("proctable: sysctl kern.proc.pid %d: %w", pid, err)
	}
	if int(kp.Proc.P_pid) != pid {
		return Proc{}, ErrNotFound
	}
	return fromKinfo(kp), nil
}

// Environ reads KERN_PROCARGS2. The kernel gives it for the caller's own
// live processes only (EINVAL for another user's, for a zombie, and for a
// process on its way out); EIO is a transient failure of a process
// mid-fork or mid-exec, retried twice.
func (r sysctlReader) Environ(pid int) ([]string, error) {
	if pid <= 0 {
		return nil, ErrNotFound
	}
	var buf []byte
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if buf, err = unix.SysctlRaw("kern.procargs2", pid); !errors.Is(err, unix.EIO) {
			break
		}
	}
	if err != nil {
		if _, serr := r.Stat(pid); errors.Is(serr, ErrNotFound) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("proctable: sysctl kern.procargs2 %d: %w", pid, err)
	}
	return parseProcArgs2(buf)
}

func fromKinfo(kp *unix.KinfoProc) Proc {
	st := kp.Proc.P_starttime
	return Proc{Pid: int(kp.Proc.P_pid), PPid: int(kp.Eproc.Ppid), Pgid: int(kp.Eproc.Pgid),
		Start:  uint64(st.Sec)*1_000_000 + uint64(st.Usec),
		Zombie: kp.Proc.P_stat == sZOMB}
}
