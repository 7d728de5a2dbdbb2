//go:build linux

package reaper

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// Detect probes the containment mechanisms, strongest first:
//   - cgroup: a writable cgroup2 mount where a child cgroup can be created
//     and removed and has cgroup.kill and cgroup.events (kernel >= 5.14);
//   - subreaper: PR_GET_CHILD_SUBREAPER and pidfd_open work and this
//     executable can be found (os.Executable) to be re-executed as the
//     guardian;
//   - process-group: pidfd_open works (kernel >= 5.3).
//
// Detect creates and removes one probe cgroup; it changes nothing else.
func Detect() []Mechanism {
	var out []Mechanism
	if mount, err := probeCgroup(); err != nil {
		out = append(out, Mechanism{Mode: ModeCgroup, Reason: err.Error()})
	} else {
		out = append(out, Mechanism{Mode: ModeCgroup, Available: true,
			Reason: "cgroup2 at " + mount + " is writable; child cgroups with cgroup.kill and cgroup.events; no per-provider helper process (one watchdog per sidecar covers its death)"})
	}
	pidfdErr := error(nil)
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		pidfdErr = err
	} else {
		unix.Close(fd)
	}
	var v int
	exe, exeErr := os.Executable()
	switch err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); {
	case err != nil:
		out = append(out, Mechanism{Mode: ModeSubreaper, Reason: "prctl(PR_GET_CHILD_SUBREAPER): " + err.Error()})
	case pidfdErr != nil:
		out = append(out, Mechanism{Mode: ModeSubreaper, Reason: "pidfd_open: " + pidfdErr.Error()})
	case exeErr != nil:
		out = append(out, Mechanism{Mode: ModeSubreaper, Reason: "cannot find this executable to re-execute as guardian: " + exeErr.Error()})
	default:
		out = append(out, Mechanism{Mode: ModeSubreaper, Available: true,
			Reason: "per-provider guardian (" + exe + " " + GuardianArg + ", a child subreaper) reaps and reports every descendant, setsid or not, and kills the tree if the sidecar dies"})
	}
	if pidfdErr != nil {
		out = append(out, Mechanism{Mode: ModeProcessGroup, Reason: "pidfd_open: " + pidfdErr.Error()})
	} else {
		out = append(out, Mechanism{Mode: ModeProcessGroup, Available: true,
			Reason: "alias of subreaper: the provider gets its own process group, but runs behind the same per-provider guardian, which catches the same processes (weaker than cgroup)"})
	}
	return out
}

func probeCgroup() (string, error) {
	mount, err := cgroup.Mount()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(mount, fmt.Sprintf("acpx-probe-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("cannot create a child cgroup under %s: %w", mount, err)
	}
	defer os.Remove(dir)
	for _, f := range []string{"cgroup.kill", "cgroup.events", "cgroup.procs"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("child cgroup has no %s (kernel too old?)", f)
		}
	}
	if err := os.Remove(dir); err != nil {
		return "", fmt.Errorf("cannot remove probe cgroup: %w", err)
	}
	return mount, nil
}
