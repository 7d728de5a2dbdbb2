//go:build linux

package reaper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctest"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

// Attacks on the cleanup proof: a process that leaves the provider cgroup,
// a fast fork chain after the guardian was SIGKILLed, nested cgroups.

// forkChainEnv makes the test binary (see TestMain) a fork-chain provider;
// its value is the chain's deadline (unix seconds).
const forkChainEnv = "ACPX_REAPER_FORKCHAIN"

// forkChainMain prints "ready", waits for one byte on stdin, then becomes a
// chain: fork -> (child) setsid, write one byte to stdout -> (parent) exit,
// forever, every signal but SIGKILL blocked (SIGTERM has no effect), each
// process living well under a millisecond. Every link checks the deadline
// and stops there, so a failing test cannot leave it running for ever.
func forkChainMain(deadline string) int {
	dl, err := strconv.ParseInt(deadline, 10, 64)
	if err != nil {
		return 2
	}
	os.Stdout.Write([]byte("ready\n"))
	var b [1]byte
	if n, _ := os.Stdin.Read(b[:]); n != 1 {
		return 0
	}
	runtime.LockOSThread()
	ts := new(unix.Timespec)
	mask := new(uint64)
	*mask = ^uint64(0)
	out := new(byte)
	*out = 'c'
	forkChain(dl, ts, mask, out)
	return 1
}

// forkChain runs after a raw fork with a single thread and no Go runtime
// to speak of: raw system calls only, no allocation, no instrumentation.
//
//go:norace
//go:nosplit
func forkChain(deadline int64, ts *unix.Timespec, mask *uint64, out *byte) {
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_BLOCK, uintptr(unsafe.Pointer(mask)), 0, 8, 0, 0)
	for {
		pid, _, errno := syscall.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if errno != 0 || pid != 0 {
			syscall.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
		}
		syscall.RawSyscall(unix.SYS_SETSID, 0, 0, 0)
		syscall.RawSyscall(unix.SYS_WRITE, 1, uintptr(unsafe.Pointer(out)), 1)
		syscall.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_REALTIME, uintptr(unsafe.Pointer(ts)), 0)
		if ts.Sec >= deadline {
			syscall.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
		}
	}
}

// drain reads r to EOF in the background: n counts the bytes, eof closes
// at EOF (every writer gone).
func drain(r io.Reader) (n *atomic.Int64, eof chan struct{}) {
	n, eof = new(atomic.Int64), make(chan struct{})
	go func() {
		defer close(eof)
		buf := make([]byte, 4096)
		for {
			k, err := r.Read(buf)
			n.Add(int64(k))
			if err != nil {
				return
			}
		}
	}()
	return n, eof
}

// waitCount waits (bounded) until n reaches want.
func waitCount(t *testing.T, n *atomic.Int64, want int64, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d bytes on stdout, want %d", what, n.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// killGuardian SIGKILLs tr's guardian and waits until it was reaped.
func killGuardian(t *testing.T, tr *Tree) {
	t.Helper()
	fd, err := unix.PidfdOpen(tr.g.pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	unix.Close(fd)
	if !waitAny(10*time.Second, tr.g.reaped) {
		t.Fatal("guardian not reaped")
	}
}

// TestGuardianKilled_FastForkChainIsKilled: the guardian is SIGKILLed (in
// ModeCgroup there is none: the sidecar is the chain's reaper from the
// start), then the provider becomes a fork chain (fork, setsid, parent exits; SIGTERM
// has no effect; each link lives well under 1 ms) whose links re-parent to
// this process one by one. A /proc snapshot sees none of them alive; the
// proof must still not be complete while the chain runs: Terminate finds
// the links among this process's own children, kills them through pinned
// pidfds and lists them. Proven by EOF on the provider's stdout (every
// link holds it) and the marker scan.
func TestGuardianKilled_FastForkChainIsKilled(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			mark, env := proctest.NewMark(t)
			s := newSup(t, mode, mark)
			deadline := time.Now().Add(20 * time.Second).Unix()
			env = append(env, forkChainEnv+"="+strconv.FormatInt(deadline, 10))
			tr, err := s.Start(Spec{Path: exe, Args: []string{"-test.run=^$"}, Env: env, Dir: "/", Name: "chain"})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			n, eof := drain(tr.Stdout())
			t.Cleanup(func() { // a failed test must not leave the chain running
				tr.Stdin().Close()
				until := time.Now().Add(25 * time.Second)
				for !isDone(eof) && time.Now().Before(until) {
					killNonGuardianChildren(s.c)
					time.Sleep(time.Millisecond)
				}
				tr.Stdout().Close()
				tr.Stderr().Close()
				<-eof
			})
			waitCount(t, n, int64(len("ready\n")), "provider ready")
			if tr.g != nil { // ModeCgroup has no guardian: the sidecar contains the chain itself
				killGuardian(t, tr)
			}
			if _, err := tr.Stdin().Write([]byte("g")); err != nil {
				t.Fatal(err)
			}
			waitCount(t, n, int64(len("ready\n"))+200, "chain running")
			waitExited(t, tr)

			term := tr.Terminate(context.Background(), termGrace, killGrace)
			if !term.Complete || !term.Verified.TreeEmpty {
				t.Fatalf("incomplete: %+v", term.Verified)
			}
			want := methodProc
			if mode == ModeCgroup {
				want = methodCgroup
			}
			if term.Verified.Method != want {
				t.Fatalf("method %q, want %q", term.Verified.Method, want)
			}
			if got := strings.Join(sigNames(term), ","); got != "SIGTERM,SIGKILL" {
				t.Fatalf("signals %s (chain ended: %v)", got, isDone(eof))
			}
			killed, reaped := 0, 0
			for _, p := range term.Processes {
				if p.Role == RoleDescendant && p.Reaped {
					reaped++
					if p.Signal == "SIGKILL" {
						killed++
					}
				}
			}
			if killed == 0 || reaped < 200 {
				t.Fatalf("%d links reaped, %d of them killed; want >= 200 and >= 1", reaped, killed)
			}
			select {
			case <-eof: // no process holds the provider's stdout any more
			case <-time.After(10 * time.Second):
				t.Fatalf("chain still writing after a complete proof (%d bytes)", n.Load())
			}
			proctest.RequireNoneAlive(t, mark)
			t.Logf("%s: %d links reaped, %d killed", mode, reaped, killed)
		})
	}
}

// killNonGuardianChildren SIGKILLs every live child of this process that is
// not a guardian (test clean-up), through pinned pidfds.
func killNonGuardianChildren(c *central) {
	c.reapMu.Lock()
	defer c.reapMu.Unlock()
	for _, pid := range selfChildren(c.self) {
		c.mu.Lock()
		g := c.guardians[pid] != nil
		c.mu.Unlock()
		if p, ok := readStat(pid); g || !ok || p.state == 'Z' {
			continue
		}
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			unix.Close(fd)
		}
	}
}

// escapeScript: the provider double-forks a child that ignores SIGTERM and
// moves itself to the root cgroup (as a root agent can); it prints that
// child's pid.
func escapeScript(mount string) string {
	return fmt.Sprintf(`(sh -c 'trap "" TERM; if echo $$ > %s/cgroup.procs; then echo $$; else echo move-failed; fi; exec sleep 1000' &); echo leader; exec sleep 1000`, mount)
}

// TestCgroup_ProcessThatLeftTheCgroupIsKilledAndListed: populated 0 is not
// enough. The escaped process (outside the cgroup, re-parented to this
// process once its parent exited) is found among this process's children;
// the proof is complete only once it is gone, lists it, and says so.
func TestCgroup_ProcessThatLeftTheCgroupIsKilledAndListed(t *testing.T) {
	mount, err := cgroup.Mount()
	if err != nil {
		t.Skip(err)
	}
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeCgroup, mark)
	tr := startSh(t, s, env, escapeScript(mount))
	esc := 0
	for _, l := range proctest.ReadLines(t, tr, 2) {
		if n, err := strconv.Atoi(l); err == nil {
			esc = n
		} else if l != "leader" {
			t.Fatalf("provider said %q", l)
		}
	}
	if cg, _ := readCgroupV2(esc); cg != "/" {
		t.Fatalf("escaped process %d in cgroup %q, want /", esc, cg)
	}
	if p, _ := readStat(esc); p.ppid != os.Getpid() {
		t.Fatalf("escaped process %d has parent %d, want this process %d", esc, p.ppid, os.Getpid())
	}
	term := tr.Terminate(context.Background(), termGrace, killGrace)
	if !term.Complete || !term.Verified.TreeEmpty || term.Containment != ModeCgroup {
		t.Fatalf("incomplete: %+v", term)
	}
	want := methodCgroup + fmt.Sprintf("; 1 of them had left the cgroup: pid %d (in /)", esc)
	if term.Verified.Method != want {
		t.Fatalf("method %q, want %q", term.Verified.Method, want)
	}
	rec, ok := findProc(term, esc)
	if !ok || rec.Role != RoleDescendant || rec.Signal != "SIGKILL" || !rec.Reaped {
		t.Fatalf("escaped process record %+v in %+v", rec, term.Processes)
	}
	if len(term.Errors) != 0 {
		t.Fatalf("errors %+v", term.Errors)
	}
	proctest.RequireNoneAlive(t, mark)
}

// TestCgroup_NestedCgroupsRemovedDepthFirst: a provider (running as root)
// creates sub-cgroups in its cgroup and moves a TERM-ignoring child two
// levels down; cgroup.kill ends it and the whole cgroup subtree is removed
// (no CGROUP_REMOVE_FAILED, no directory left).
func TestCgroup_NestedCgroupsRemovedDepthFirst(t *testing.T) {
	mount, err := cgroup.Mount()
	if err != nil {
		t.Skip(err)
	}
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeCgroup, mark)
	script := fmt.Sprintf(`cg=%s$(sed -n 's/^0:://p' /proc/self/cgroup); mkdir -p $cg/a/b $cg/c || echo mkdir-failed
sh -c 'trap "" TERM; echo $$ > '$cg'/a/b/cgroup.procs && echo $$; exec sleep 1000' & echo leader; wait`, mount)
	tr := startSh(t, s, env, script)
	child := 0
	for _, l := range proctest.ReadLines(t, tr, 2) {
		if n, err := strconv.Atoi(l); err == nil {
			child = n
		} else if l != "leader" {
			t.Fatalf("provider said %q", l)
		}
	}
	rel := "/" + cgroup.Rel(s.cgMount, tr.CgroupPath())
	if cg, _ := readCgroupV2(child); cg != rel+"/a/b" {
		t.Fatalf("child %d in cgroup %q, want %s/a/b", child, cg, rel)
	}
	term := tr.Terminate(context.Background(), termGrace, killGrace)
	requireComplete(t, term, ModeCgroup)
	if len(term.Errors) != 0 {
		t.Fatalf("errors %+v", term.Errors)
	}
	if rec, ok := findProc(term, child); !ok || rec.Signal != "SIGKILL" {
		t.Fatalf("child record %+v in %+v", rec, term.Processes)
	}
	if _, err := os.Stat(tr.CgroupPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cgroup %s not removed: %v", tr.CgroupPath(), err)
	}
	proctest.RequireNoneAlive(t, mark)
}

// TestRemoveCgroupSubtree_LeavesPopulatedCgroup: only empty cgroups are
// removed; a populated one (and its ancestors) stays, and the error names it.
func TestRemoveCgroupSubtree_LeavesPopulatedCgroup(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeCgroup, mark)
	dir := filepath.Join(s.cgParent, "rmtest-"+mark)
	if err := os.MkdirAll(filepath.Join(dir, "x", "y"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "z"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cgroup.RemoveSubtree(dir) })
	tr := startSh(t, s, env, `echo ready; exec sleep 1000`)
	proctest.ReadLines(t, tr, 1)
	// Move the provider into dir/x/y (we are root).
	if err := os.WriteFile(filepath.Join(dir, "x", "y", "cgroup.procs"), []byte(strconv.Itoa(tr.Pid())), 0); err != nil {
		t.Fatal(err)
	}
	err := cgroup.RemoveSubtree(dir)
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Path != filepath.Join(dir, "x", "y") {
		t.Fatalf("cgroup.RemoveSubtree = %v, want an error naming x/y", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "z")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty sibling z not removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x", "y")); err != nil {
		t.Fatalf("populated cgroup removed?! %v", err)
	}
	// The provider left its own cgroup, but it is the guardian's child:
	// Terminate still ends it.
	term := tr.Terminate(context.Background(), termGrace, killGrace)
	if !term.Complete {
		t.Fatalf("incomplete: %+v", term)
	}
	if err := cgroup.RemoveSubtree(dir); err != nil {
		t.Fatal(err)
	}
	proctest.RequireNoneAlive(t, mark)
}
