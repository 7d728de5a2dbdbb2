//go:build linux

package reaper

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctest"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// needV1 skips unless controller c's limits are enforced in a cgroup v1
// hierarchy here (a hybrid host), and returns that hierarchy.
func needV1(t *testing.T, c string) cgroup.V1Hierarchy {
	t.Helper()
	p, err := cgroup.PlanLimits(Limits{MemoryBytes: 1 << 30, Pids: 64, CPUPercent: 100})
	if err != nil {
		t.Skipf("limits not enforceable here: %v", err)
	}
	for _, h := range p.V1 {
		if h.Controller == c {
			return h
		}
	}
	t.Skipf("the %s limit is not enforced in cgroup v1 here", c)
	return cgroup.V1Hierarchy{}
}

// v1Leftovers lists provider cgroups named name-* in s's v1 parents and
// v2 parent.
func v1Leftovers(s *Supervisor, name string) []string {
	left, _ := filepath.Glob(filepath.Join(s.cgParent, name+"-*"))
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.v1Parents {
		more, _ := filepath.Glob(filepath.Join(p, name+"-*"))
		left = append(left, more...)
	}
	return left
}

// TestStart_LimitsBindTheProvidersFirstFork: with pids 1 the provider's
// very first fork fails (EAGAIN), so it was inside its pids limit before
// it ran (docs/protocol.md §18.2; on a hybrid host the launch entry
// joined the v1 cgroup before execve).
func TestStart_LimitsBindTheProvidersFirstFork(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeCgroup, mark)
	if ok, why := cgroup.LimitsSupported(Limits{Pids: 1}); !ok {
		t.Skipf("pids limit not enforceable here: %s", why)
	}
	tr, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", `echo start; /bin/true; echo forked`},
		Env: env, Name: "fork1", Limits: Limits{Pids: 1}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { tr.Stdin().Close(); tr.Stdout().Close(); tr.Stderr().Close() })
	errc := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(tr.Stderr()); errc <- b }()
	out, _ := io.ReadAll(tr.Stdout())
	waitExited(t, tr)
	stderr := <-errc
	if string(out) != "start\n" || !strings.Contains(strings.ToLower(string(stderr)), "fork") {
		t.Errorf("stdout %q, stderr %q: want only \"start\" and the refused fork", out, stderr)
	}
	r, err := tr.Resources()
	if err != nil || r.PidsLimitHits < 1 || r.PidsMax == nil || *r.PidsMax != 1 {
		t.Errorf("Resources %+v, %v: want pidsMax 1 and pidsLimitHits >= 1", r, err)
	}
	requireComplete(t, tr.Terminate(context.Background(), termGrace, killGrace), ModeCgroup)
	proctest.RequireNoneAlive(t, mark)
	if left := v1Leftovers(s, "fork1"); len(left) != 0 {
		t.Errorf("cgroups left after the proof: %v", left)
	}
}

// TestStart_V1ExecFailureLaunchesNothing: a provider that cannot be
// executed through the launch entry fails Start with the execve
// errno (as a direct start does), nothing stays alive, and no v1 or v2
// cgroup is left.
func TestStart_V1ExecFailureLaunchesNothing(t *testing.T) {
	needV1(t, "pids")
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeCgroup, mark)
	_, err := s.Start(Spec{Path: "/nonexistent/provider", Env: env, Name: "nox", Limits: Limits{Pids: 16}})
	if !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "/nonexistent/provider") {
		t.Fatalf("Start of a missing program: %v, want ENOENT naming it", err)
	}
	proctest.RequireNoneAlive(t, mark)
	if left := v1Leftovers(s, "nox"); len(left) != 0 {
		t.Errorf("cgroups left after the failed start: %v", left)
	}
}

// TestStart_V1ExecFile: an opened ExecFile (binary and "#!" script) runs
// through the launch entry; Path is only argv[0]; the binary's
// descriptor does not leak into the provider.
func TestStart_V1ExecFile(t *testing.T) {
	needV1(t, "pids")
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeCgroup, mark)
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "prov.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho script \"$0\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, file string
		flags      int
		args       []string
		want       string
		checkFDs   bool
	}{
		{"binary", sh, os.O_RDONLY, []string{"-c", "echo binary; exec sleep 1000"}, "binary", true},
		{"binary-O_PATH", sh, unix.O_PATH, []string{"-c", "echo binary; exec sleep 1000"}, "binary", true},
		{"script", script, os.O_RDONLY, nil, "script /proc/self/fd/3", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := os.OpenFile(c.file, c.flags|unix.O_NOFOLLOW, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tr, err := s.Start(Spec{Path: "/nonexistent/provider", Args: c.args, Env: env, ExecFile: f, Name: "xf", Limits: Limits{Pids: 16}})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			defer func() { tr.Stdin().Close(); tr.Stdout().Close(); tr.Stderr().Close() }()
			lines := proctest.ReadLines(t, tr, 1)
			if lines[0] != c.want {
				t.Errorf("stdout %q, want %q", lines[0], c.want)
			}
			if c.checkFDs {
				// Only stdio and what this process itself passes on to
				// every child (descriptors it inherited without
				// close-on-exec): not the status pipe, not the executable.
				allowed := inheritableFDs(t)
				allowed["0"], allowed["1"], allowed["2"] = true, true, true
				// The shell prints, then execs sleep, whose dynamic loader
				// holds each library it maps open for a moment: a leaked
				// descriptor stays, a loader's goes. Wait (bounded) for
				// sleep and for no descriptor outside the allowed ones.
				proctest.WaitComm(t, tr.Pid(), "sleep")
				var extra []string
				for deadline := time.Now().Add(5 * time.Second); ; {
					extra = extra[:0]
					ents, err := os.ReadDir("/proc/" + strconv.Itoa(tr.Pid()) + "/fd")
					if err != nil {
						t.Fatal(err)
					}
					for _, e := range ents {
						if !allowed[e.Name()] {
							target, _ := os.Readlink("/proc/" + strconv.Itoa(tr.Pid()) + "/fd/" + e.Name())
							extra = append(extra, e.Name()+" -> "+target)
						}
					}
					if len(extra) == 0 || time.Now().After(deadline) {
						break
					}
					time.Sleep(2 * time.Millisecond) // polling /proc, bounded
				}
				for _, x := range extra {
					t.Errorf("the provider holds descriptor %s", x)
				}
			} else {
				waitExited(t, tr)
				if st := tr.ExitStatus(); st.Code == nil || *st.Code != 0 {
					t.Errorf("exit %+v, want 0", st)
				}
			}
			requireComplete(t, tr.Terminate(context.Background(), termGrace, killGrace), ModeCgroup)
			proctest.RequireNoneAlive(t, mark)
		})
	}
}

// inheritableFDs lists this process's descriptors without close-on-exec
// (fdinfo flags lack O_CLOEXEC): every child inherits those.
func inheritableFDs(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	ents, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				if f, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64); err == nil && f&unix.O_CLOEXEC == 0 {
					out[e.Name()] = true
				}
			}
		}
	}
	return out
}
