package e2e

// Steps that look at and tidy the process table: the orphan reaper (the
// test process is a child subreaper), guardians, and leftovers of a test.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
)

// orphans reaps processes re-parented to the test process: the test makes
// itself a child subreaper (PID 1 here never reaps), so the guardians and
// providers of a SIGKILLed sidecar come to it and do not stay zombies
// forever. Processes started through exec.Cmd are left to their Wait.
var orphans struct {
	once    sync.Once
	mu      sync.Mutex
	tracked map[int]bool
	stop    chan struct{}
	done    chan struct{}
}

func trackChild(pid int) {
	orphans.mu.Lock()
	if orphans.tracked == nil {
		orphans.tracked = map[int]bool{}
	}
	orphans.tracked[pid] = true
	orphans.mu.Unlock()
}

// runTracked runs cmd to its end as exec.Cmd.Output does, tracked from
// its start (under the lock the orphan reaper checks), so the reaper never
// takes its wait status: a short-lived child (e.g. `--version`) could
// otherwise exit and be reaped between Start and trackChild.
func runTracked(cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &out
	}
	if err := startTracked(cmd); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	return out.Bytes(), err
}

// startTracked is cmd.Start with the child tracked from its start (see
// runTracked): its wait status stays for cmd.Wait. Every child a test
// Waits for is started so (an untracked one's zombie could be taken by
// the orphan reaper: cmd.Wait then fails and ExitCode is -1).
func startTracked(cmd *exec.Cmd) error {
	orphans.mu.Lock()
	defer orphans.mu.Unlock()
	err := cmd.Start()
	if err == nil {
		if orphans.tracked == nil {
			orphans.tracked = map[int]bool{}
		}
		orphans.tracked[cmd.Process.Pid] = true
	}
	return err
}

// startOrphanReaper starts the reaping loop once; stopOrphanReaper (from
// TestMain) ends it.
func startOrphanReaper(t *testing.T) {
	orphans.once.Do(func() {
		if err := reaper.BecomeSubreaper(); err != nil {
			t.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
		}
		orphans.stop, orphans.done = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(orphans.done)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				reapUntracked()
				select {
				case <-orphans.stop:
					return
				case <-tick.C:
				}
			}
		}()
	})
}

func stopOrphanReaper() {
	if orphans.stop != nil {
		close(orphans.stop)
		<-orphans.done
	}
}

// reapUntracked reaps zombie children of this process not started by
// exec.Cmd.
func reapUntracked() {
	me := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z' {
			continue
		}
		var st byte
		var ppid int
		if _, err := fmtSscan(string(stat[i+2:]), &st, &ppid); err != nil || ppid != me {
			continue
		}
		orphans.mu.Lock()
		mine := orphans.tracked[pid]
		orphans.mu.Unlock()
		if !mine {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

// fmtSscan reads the state and ppid fields that follow "comm) ".
func fmtSscan(s string, st *byte, ppid *int) (int, error) {
	var state string
	n, err := fmt.Sscanf(s, "%s %d", &state, ppid)
	if len(state) > 0 {
		*st = state[0]
	}
	return n, err
}

// guardiansOf lists the guardian processes (children of pid running the
// sidecar binary with the __guardian argument).
func guardiansOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || !bytes.Contains(cmd, []byte("__guardian")) {
			continue
		}
		var st byte
		var ppid int
		if _, err := fmtSscan(string(stat[i+2:]), &st, &ppid); err == nil && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// waitStopped waits (bounded by d) until every thread of each of pids is
// in the stopped state: after kill(SIGSTOP) returns, threads of a
// multi-threaded process keep running until the group stop reaches them.
func waitStopped(t testing.TB, pids []int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, pid := range pids {
		for !threadsStopped(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d not stopped %v after SIGSTOP", pid, d)
			}
			time.Sleep(5 * time.Millisecond) // polling /proc, bounded by d
		}
	}
}

// threadsStopped reports whether pid exists and all its threads are in
// state 'T' (a thread that exited while being listed counts as not yet).
func threadsStopped(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(dir + task.Name() + "/stat")
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' {
			return false
		}
	}
	return true
}

// waitGrandchild waits (bounded by d) until the fault agent's grandchild
// (mode grandchild, re-executed with --faultagent-grandchild) runs with
// mark in its environment, and returns its pid.
func waitGrandchild(t testing.TB, mark string, d time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, pid := range markedPids(mark, "") {
			cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if bytes.Contains(cmd, []byte("\x00--faultagent-grandchild\x00")) {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fault agent grandchild carries the marker after %v", d)
		}
		time.Sleep(20 * time.Millisecond) // polling the process table, bounded by d
	}
}

// isHelper reports whether pid runs a helper of the sidecar: a guardian,
// or the PID-namespace init of a tree.
func isHelper(pid int) bool {
	cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return bytes.Contains(cmd, []byte("__guardian")) || bytes.HasPrefix(cmd, []byte(sandboxInitName+"\x00"))
}

// faultChildFlag is argv[1] of a child the fault agent re-executes
// itself as (grandchildFlag in internal/faultagent/main.go).
const faultChildFlag = "--faultagent-grandchild"

// faultChildOf returns the one live process carrying mark that the
// provider forked as the fault agent's child: its parent is provider and
// its argv[1] is faultChildFlag. The provider is not the only other
// marked process: a guardian and a tree's PID-namespace init run with
// the agent's environment too, each in a group of its own, and the
// numeric order of /proc does not tell them apart once pid numbers have
// wrapped between their forks. The fault agent waits for its child's
// ready byte before it reads any message, so once the open has answered
// the child is already there. Anything but exactly one such process
// fails the test, listing every marked process.
func faultChildOf(t testing.TB, mark string, provider int) int {
	t.Helper()
	marked := markedPids(mark, "")
	var found []int
	for _, pid := range marked {
		ppid, _, argv := procInfo(pid)
		if ppid == provider && len(argv) > 1 && argv[1] == faultChildFlag {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d children of provider %d run %s, want one; marked processes:%s",
			len(found), provider, faultChildFlag, describeProcs(marked))
	}
	return found[0]
}

// procInfo reads pid's parent, process group and argv from /proc (zero
// values when pid is gone).
func procInfo(pid int) (ppid, pgrp int, argv []string) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if i := bytes.LastIndexByte(stat, ')'); err == nil && i >= 0 {
		// After "comm)": state, ppid, pgrp.
		var state string
		_, _ = fmt.Sscan(string(stat[i+1:]), &state, &ppid, &pgrp)
	}
	cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if len(cmd) > 0 {
		argv = strings.Split(strings.TrimSuffix(string(cmd), "\x00"), "\x00")
	}
	return ppid, pgrp, argv
}

// describeProcs is one line per pid (pid, parent, group, command line)
// for a failure message.
func describeProcs(pids []int) string {
	out := ""
	for _, pid := range pids {
		ppid, pgrp, argv := procInfo(pid)
		out += fmt.Sprintf("\n  pid %d ppid %d pgrp %d: %s", pid, ppid, pgrp, strings.Join(argv, " "))
	}
	return out
}

// sandboxInitName is argv[0] of a tree's PID-namespace init
// (sandbox.InitName): a process of the tree the proof lists, started by
// the sidecar, not by the agent.
const sandboxInitName = "acpx-init"

// sleepersIn returns live `sleep 303`/`sleep 304` processes whose cwd is dir.
func sleepersIn(dir string) []int {
	var out []int
	for _, pid := range markedPids("no-such-mark", dir) {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if bytes.HasPrefix(cmd, []byte("sleep\x00303")) || bytes.HasPrefix(cmd, []byte("sleep\x00304")) {
			out = append(out, pid)
		}
	}
	return out
}

// waitMarked waits until at least one live process carries mark.
func waitMarked(t testing.TB, mark string, d time.Duration) []int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if pids := markedPids(mark, ""); len(pids) > 0 {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process carries the marker after %v", d)
		}
		time.Sleep(20 * time.Millisecond) // polling the process table, bounded by d
	}
}

// killMarkedOnCleanup SIGKILLs, by pid, whatever still carries mark when
// the test ends, so a failing test cannot leak (PID 1 here never reaps).
func killMarkedOnCleanup(t *testing.T, mark string) {
	t.Cleanup(func() {
		for _, pid := range markedPids(mark, "") {
			t.Logf("killing leftover marked pid %d", pid)
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	})
}

// openFault opens a fault-agent session with the given modes and marker.
func openFault(t *testing.T, s *sidecar, key, cwd, mark string, modes string) openResult {
	t.Helper()
	var open openResult
	s.mustCall("session/open", map[string]any{"sessionKey": key, "agent": "generic",
		"command": map[string]any{"path": faultBin, "args": []string{"--mode", modes}}, "cwd": cwd,
		"env": map[string]string{"ACPX_TEST_MARK": mark}}, &open)
	return open
}

type recoveredProof struct {
	Proof proof `json:"proof"`
}
