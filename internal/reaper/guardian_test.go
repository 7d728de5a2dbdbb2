//go:build linux

package reaper

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctest"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
)

const (
	miniSidecarEnv = "ACPX_REAPER_MINI_SIDECAR"
	miniMarkEnv    = "ACPX_REAPER_MINI_MARK"
	miniCgEnv      = "ACPX_REAPER_MINI_CGPARENT"
)

// miniPids is what the mini sidecar prints once its tree is up.
type miniPids struct {
	Guardian, Provider, Grandchild int
}

// treeScript: a provider ignoring TERM, with a same-group child and a
// setsid'd grandchild, both ignoring TERM; it prints the grandchild's pid.
const treeScript = `setsid sh -c 'trap "" TERM; echo $$; exec sleep 1000' & trap "" TERM; sh -c 'trap "" TERM; exec sleep 1000' & echo leader; wait`

// miniSidecar is a stand-in sidecar (run in a re-executed test binary): a
// Supervisor with one provider tree; it prints the pids as one JSON line and
// waits for stdin EOF (or its own SIGKILL).
func miniSidecar(mode Mode) int {
	s, err := newSupervisor(Options{Mode: mode, CgroupParent: os.Getenv(miniCgEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mini sidecar:", err)
		return 1
	}
	env := []string{"PATH=/usr/bin:/bin", "ACPX_TEST_MARK=" + os.Getenv(miniMarkEnv)}
	tr, err := s.Start(Spec{Path: "/bin/sh", Args: []string{"-c", treeScript}, Env: env, Dir: "/", Name: "mini"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mini sidecar:", err)
		return 1
	}
	sc := bufio.NewScanner(tr.Stdout())
	out := miniPids{Provider: tr.Pid()}
	for i := 0; i < 2 && sc.Scan(); i++ {
		if n, err := strconv.Atoi(sc.Text()); err == nil {
			out.Grandchild = n
		}
	}
	if tr.g != nil {
		out.Guardian = tr.g.pid
	} else {
		out.Guardian = s.wd.pid // ModeCgroup: the one watchdog
	}
	b, _ := json.Marshal(out)
	os.Stdout.Write(append(b, '\n'))
	var buf [1]byte
	os.Stdin.Read(buf[:]) // until the test kills us (or goes away)
	s.Close()
	return 0
}

// TestSidecarKilled_GuardianKillsTree: a sidecar SIGKILLed with a live tree
// (provider, group child and setsid grandchild all ignoring TERM) leaves
// nothing alive: its guardian sees its control pipe hit EOF and kills the
// tree (marker scan of /proc, bounded wait). In cgroup mode the provider's
// cgroup is removed as well.
func TestSidecarKilled_GuardianKillsTree(t *testing.T) {
	// Orphans of the killed mini sidecar (its guardian) come to us, not to
	// PID 1 (which never reaps here), so we can reap them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			mark, _ := proctest.NewMark(t)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = []string{"PATH=/usr/bin:/bin", miniSidecarEnv + "=" + string(mode), miniMarkEnv + "=" + mark}
			cgParent := ""
			if mode == ModeCgroup {
				mount, err := cgroup.Mount()
				if err != nil {
					t.Skip(err)
				}
				cgParent = filepath.Join(mount, "acpx-test-mini-"+mark)
				cmd.Env = append(cmd.Env, miniCgEnv+"="+cgParent)
			}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pids miniPids
			t.Cleanup(func() { // safety net for a failed test
				stdin.Close()
				for _, pid := range proctest.Alive(mark) {
					if fd, err := unix.PidfdOpen(pid, 0); err == nil {
						unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
						unix.Close(fd)
					}
				}
				cmd.Process.Kill()
				cmd.Wait()
				reapPid(pids.Guardian, 5*time.Second)
				if cgParent != "" {
					os.Remove(cgParent)
				}
			})
			lines := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(stdout)
				if sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			select {
			case l, ok := <-lines:
				if !ok || json.Unmarshal([]byte(l), &pids) != nil {
					t.Fatalf("mini sidecar printed %q", l)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("mini sidecar did not report its tree")
			}
			helpers := 1 // the guardian carries the provider's environment (marker)
			if mode == ModeCgroup {
				helpers = 0 // the watchdog carries the sidecar's
			}
			// A child mid-execve reads an empty environment for a moment:
			// wait (bounded) until the scan sees the whole tree.
			alive := proctest.Alive(mark)
			for deadline := time.Now().Add(5 * time.Second); len(alive) < 3+helpers && time.Now().Before(deadline); alive = proctest.Alive(mark) {
				time.Sleep(2 * time.Millisecond) // polling the table, bounded
			}
			for _, pid := range []int{pids.Provider, pids.Grandchild} {
				if !containsInt(alive, pid) {
					t.Fatalf("pid %d of %+v not alive before the kill (alive %v)", pid, pids, alive)
				}
			}
			if p, ok := readStat(pids.Guardian); !ok || p.state == 'Z' || (helpers == 1) != containsInt(alive, pids.Guardian) {
				t.Fatalf("guardian/watchdog %d of %+v not alive before the kill (alive %v)", pids.Guardian, pids, alive)
			}
			if p, _ := readStat(pids.Grandchild); p.sid != pids.Grandchild {
				t.Fatalf("grandchild not in its own session: %+v", p)
			}
			if len(alive) < 3+helpers {
				t.Fatalf("want provider, group child, grandchild (and guardian) alive, got %v", alive)
			}

			killed := time.Now()
			if err := cmd.Process.Signal(unix.SIGKILL); err != nil { // os.Process signals via its pidfd
				t.Fatal(err)
			}
			cmd.Wait()
			deadline := killed.Add(15 * time.Second)
			for len(proctest.Alive(mark)) > 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if left := proctest.Alive(mark); len(left) > 0 {
				t.Fatalf("alive %v after sidecar SIGKILL (tree %+v)", left, pids)
			}
			t.Logf("%s: whole tree gone %v after the sidecar's SIGKILL", mode, time.Since(killed).Round(time.Millisecond))
			if !reapPid(pids.Guardian, 15*time.Second) {
				t.Errorf("guardian/watchdog %d not re-parented to / reaped by the test", pids.Guardian)
			}
			if cgParent != "" {
				ents, _ := os.ReadDir(cgParent)
				for _, e := range ents {
					if e.IsDir() {
						t.Errorf("provider cgroup %s left behind", e.Name())
					}
				}
			}
		})
	}
}

// reapPid waits up to d to reap pid (a zombie re-parented to this subreaper).
func reapPid(pid int, d time.Duration) bool {
	if pid <= 0 {
		return false
	}
	deadline := time.Now().Add(d)
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if wpid == pid {
			return true
		}
		if err != nil && err != unix.EINTR || time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestSubreaper_DoubleForkedOrphanFound: a grandchild orphaned by a double
// fork (its parent exited at once) re-parents to the guardian, which kills
// and reaps it; it is listed as a descendant.
func TestSubreaper_DoubleForkedOrphanFound(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeSubreaper, mark)
	tr := startSh(t, s, env, `(sh -c 'trap "" TERM; echo $$; exec sleep 1000' &); echo leader; exec sleep 1000`)
	lines := proctest.ReadLines(t, tr, 2)
	gc := 0
	for _, l := range lines {
		if n, err := strconv.Atoi(l); err == nil {
			gc = n
		}
	}
	p, ok := readStat(gc)
	if !ok || p.ppid != tr.g.pid {
		t.Fatalf("orphan %d has parent %d, want the guardian %d", gc, p.ppid, tr.g.pid)
	}
	term := tr.Terminate(context.Background(), termGrace, killGrace)
	requireComplete(t, term, ModeSubreaper)
	rec, ok := findProc(term, gc)
	if !ok || rec.Role != RoleDescendant || rec.Signal != "SIGKILL" || !rec.Reaped {
		t.Fatalf("orphan record %+v in %+v", rec, term.Processes)
	}
	if lp, ok := findProc(term, tr.Pid()); !ok || lp.Role != RoleProvider || lp.Signal != "SIGTERM" {
		t.Fatalf("provider record %+v", lp)
	}
	proctest.RequireNoneAlive(t, mark)
}

// TestSubreaper_DeadLeaderOrphansReapedWithCodes: the provider exits with a
// code; an orphan that exits on its own has its code reported; a setsid'd
// orphan lingers under the guardian until Terminate; every process of the
// proof was reaped by the guardian.
func TestSubreaper_DeadLeaderOrphansReapedWithCodes(t *testing.T) {
	mark, env := proctest.NewMark(t)
	s := newSup(t, ModeSubreaper, mark)
	tr := startSh(t, s, env, `setsid sh -c 'trap "" TERM; echo $$; exec sleep 1000' & (sh -c 'sleep 0.05; exit 5' &); sleep 0.2; exit 3`)
	gc, err := strconv.Atoi(proctest.ReadLines(t, tr, 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	waitExited(t, tr)
	if st := tr.ExitStatus(); st.Code == nil || *st.Code != 3 || st.At.IsZero() {
		t.Fatalf("exit status %+v", st)
	}
	proctest.WaitListed(t, mark, gc) // the orphan lingers (it may be mid-execve for a moment)
	term := tr.Terminate(context.Background(), termGrace, killGrace)
	requireComplete(t, term, ModeSubreaper)
	if rec, ok := findProc(term, gc); !ok || rec.Role != RoleDescendant || rec.Signal != "SIGKILL" {
		t.Fatalf("orphan record %+v in %+v", rec, term.Processes)
	}
	five := false
	for _, p := range term.Processes {
		if !p.Reaped || p.ExitedAt.IsZero() {
			t.Errorf("process %+v not reported with a wait status", p)
		}
		if p.Role == RoleDescendant && p.ExitCode != nil && *p.ExitCode == 5 {
			five = true
		}
	}
	if !five {
		t.Fatalf("child exit code 5 not reported: %+v", term.Processes)
	}
	proctest.RequireNoneAlive(t, mark)
}

// TestGuardianKilled_SidecarFallsBack: if the guardian itself is
// SIGKILLed, its children re-parent to this process and Terminate still
// proves the tree gone (the guardian-less method), in both guardian modes.
func TestGuardianKilled_SidecarFallsBack(t *testing.T) {
	for _, mode := range []Mode{ModeSubreaper, ModeProcessGroup} {
		t.Run(string(mode), func(t *testing.T) {
			mark, env := proctest.NewMark(t)
			s := newSup(t, mode, mark)
			tr := startSh(t, s, env, treeScript)
			gc := 0
			for _, l := range proctest.ReadLines(t, tr, 2) {
				if n, err := strconv.Atoi(l); err == nil {
					gc = n
				}
			}
			fd, err := unix.PidfdOpen(tr.g.pid, 0)
			if err != nil {
				t.Fatal(err)
			}
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			unix.Close(fd)
			if !waitAny(10*time.Second, tr.g.reaped) {
				t.Fatal("guardian not reaped")
			}
			term := tr.Terminate(context.Background(), termGrace, killGrace)
			if !term.Complete || !term.Verified.TreeEmpty {
				t.Fatalf("incomplete: %+v", term)
			}
			want := methodProc
			if term.Verified.Method != want {
				t.Fatalf("method %q, want %q", term.Verified.Method, want)
			}
			if rec, ok := findProc(term, gc); !ok || rec.Role != RoleDescendant {
				t.Fatalf("grandchild record %+v in %+v", rec, term.Processes)
			}
			if !strings.Contains(strings.Join(sigNames(term), ","), "SIGKILL") {
				t.Fatalf("signals %v", sigNames(term))
			}
			proctest.RequireNoneAlive(t, mark)
		})
	}
}
