//go:build linux

package cgroup

// The cgroup v2 files: the mount, provider cgroup creation (NewProvider,
// the one place a provider cgroup is made), cgroup.events, cgroup.procs,
// cgroup.kill (WriteKill, the one writer) and removal. The event-driven
// wait for "populated 0" is watch_linux.go.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Mount returns the first cgroup2 mount point listed in
// /proc/self/mountinfo that this process may write to.
func Mount() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	var found []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 || qf[0] != "cgroup2" {
			continue
		}
		found = append(found, unescapeMount(pf[4]))
	}
	if len(found) == 0 {
		return "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
	}
	for _, m := range found {
		if unix.Access(m, unix.W_OK) == nil {
			return m, nil
		}
	}
	return "", errors.New("cgroup2 mounted at " + found[0] + " but not writable")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space etc).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Populated reads "populated" from <dir>/cgroup.events. A missing
// directory counts as not populated (a populated cgroup cannot be removed).
func Populated(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return true, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return strings.TrimSpace(v) != "0", nil
		}
	}
	return true, errors.New("cgroup.events has no populated line")
}

// Procs lists the pids in <dir>/cgroup.procs (live members; zombies
// are not listed).
func Procs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// Within reports whether the cgroup v2 path cg (as in
// /proc/<pid>/cgroup, "0::<path>") is rel or below it.
func Within(cg, rel string) bool {
	return cg == rel || strings.HasPrefix(cg, rel+"/")
}

// maxCgroupDepth bounds the walks below a provider cgroup (a provider that
// runs as root may create sub-cgroups; the kernel bounds nothing by default).
const maxCgroupDepth = 256

// TreeProcs lists the pids in <dir>/cgroup.procs and in the
// cgroup.procs of every cgroup below dir (live members of the whole
// subtree; zombies are not listed).
func TreeProcs(dir string) []int {
	var out []int
	var walk func(d string, depth int)
	walk = func(d string, depth int) {
		out = append(out, Procs(d)...)
		if depth >= maxCgroupDepth {
			return
		}
		ents, err := os.ReadDir(d)
		if err != nil {
			return
		}
		for _, e := range ents {
			if e.IsDir() {
				walk(filepath.Join(d, e.Name()), depth+1)
			}
		}
	}
	walk(dir, 0)
	return out
}

// SidecarParent is a sidecar's default cgroup parent: a directory
// "acpx-sidecar-<pid>" below some cgroup.
type SidecarParent struct {
	Dir string // its path
	Pid int    // the sidecar's pid, from its name
}

// OtherSidecarParents lists the default cgroup parents directly below dir
// ("acpx-sidecar-<pid>" directories) of sidecars other than this process;
// nil if dir cannot be read. Whether each pid is still alive is left to
// the caller (its sweep decides what counts as gone).
func OtherSidecarParents(dir string) []SidecarParent {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []SidecarParent
	for _, e := range ents {
		pidText, ok := strings.CutPrefix(e.Name(), "acpx-sidecar-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || !e.IsDir() || pid == os.Getpid() {
			continue
		}
		out = append(out, SidecarParent{Dir: filepath.Join(dir, e.Name()), Pid: pid})
	}
	return out
}

// RemoveSubtree removes the cgroup directory dir and every cgroup below
// it, deepest first (a provider running as root may have created
// sub-cgroups, and rmdir of a cgroup that has children fails with EBUSY).
// Only rmdir is used, so a cgroup that still has processes is never
// removed. A missing dir is not an error. The first error is returned as
// an *os.PathError naming the directory that could not be removed.
func RemoveSubtree(dir string) error {
	return removeCgroupAt(dir, 0)
}

func removeCgroupAt(dir string, depth int) error {
	var first error
	if depth < maxCgroupDepth {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		for _, e := range ents {
			if e.IsDir() { // d_type: cgroupfs has no symlinks to follow
				if err := removeCgroupAt(filepath.Join(dir, e.Name()), depth+1); err != nil && first == nil {
					first = err
				}
			}
		}
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		if first != nil {
			return first
		}
		return &os.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
}

// cgSeq numbers provider cgroup directories process-wide (several
// reaper.Supervisors may share the default parent).
var cgSeq atomic.Uint64

// NewProvider creates the cgroup "<parent>/<name>-<n>" for one
// provider and opens it (O_DIRECTORY, for clone3 CLONE_INTO_CGROUP). It is
// the ONE place a provider cgroup is created: per-provider cgroup settings
// (limits) belong here, before any process is in it. The caller closes fd
// and removes dir (RemoveSubtree) on a failed launch. rel is dir as
// /proc/<pid>/cgroup shows it ("/acpx-sidecar-1/provider-3").
func NewProvider(mount, parent, name string) (dir, rel string, fd int, err error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", "", -1, fmt.Errorf("reaper: create cgroup parent: %w", err)
	}
	dir = filepath.Join(parent, fmt.Sprintf("%s-%d", name, cgSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", "", -1, fmt.Errorf("reaper: create cgroup: %w", err)
	}
	fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		return "", "", -1, fmt.Errorf("reaper: open cgroup: %w", err)
	}
	return dir, "/" + Rel(mount, dir), fd, nil
}

// WriteKill writes "1" to <dir>/cgroup.kill: the kernel SIGKILLs
// every process of the cgroup and of every cgroup below it, forks racing
// the write included (kernel >= 5.14). It is the one cgroup.kill writer of
// the sidecar. A missing directory is not an error (nothing to kill).
func WriteKill(dir string) error {
	err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	if err != nil && errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cgroup.kill: %w", err)
	}
	return nil
}

// Rel is p relative to base with forward slashes (a cgroup path below a
// mount: Rel("/sys/fs/cgroup", "/sys/fs/cgroup/a/b") is "a/b"); p itself
// when it cannot be made relative.
func Rel(base, p string) string {
	r, err := filepath.Rel(base, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}
