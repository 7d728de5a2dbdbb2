//go:build linux

package proctest

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/procfs"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// NewMark returns a fresh marker and a minimal environment carrying it
// (PATH and testmark.Env).
func NewMark(t *testing.T) (string, []string) {
	t.Helper()
	mark := testmark.New()
	return mark, []string{"PATH=/usr/bin:/bin", testmark.Env + "=" + mark}
}

// Alive lists the live (non-zombie) processes whose environment carries
// mark, by pid.
func Alive(mark string) []int {
	want := testmark.Env + "=" + mark + "\x00"
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok := procfs.ReadStat(pid)
		if !ok || p.State == 'Z' {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		if strings.Contains(string(env)+"\x00", want) {
			out = append(out, pid)
		}
	}
	return out
}

// RequireNoneAlive fails t when a process carrying mark is alive: the
// end-of-test scan (leaks are found by marker, not by name).
func RequireNoneAlive(t *testing.T, mark string) {
	t.Helper()
	if pids := Alive(mark); len(pids) > 0 {
		t.Fatalf("processes with marker still alive: %v", pids)
	}
}

// WaitListed waits (5 s deadline) until the marker scan lists pid.
func WaitListed(t *testing.T, mark string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		for _, p := range Alive(mark) {
			if p == pid {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d not seen by the marker scan after 5 s", pid)
		}
		time.Sleep(2 * time.Millisecond) // polling the table, bounded
	}
}

// WaitComm waits (5 s deadline) until process pid's comm is want.
func WaitComm(t *testing.T, pid int, want string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if strings.TrimSpace(string(b)) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d is %q after 5 s, want %q", pid, strings.TrimSpace(string(b)), want)
		}
		time.Sleep(2 * time.Millisecond) // polling /proc, bounded
	}
}

// ReadLines reads n lines of a tree's stdout, failing t after a 10 s
// deadline (then it closes stdout to end the reader).
func ReadLines(t *testing.T, tr interface{ Stdout() io.ReadCloser }, n int) []string {
	t.Helper()
	ch := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(tr.Stdout())
		var lines []string
		for len(lines) < n && sc.Scan() {
			lines = append(lines, sc.Text())
		}
		ch <- lines
	}()
	select {
	case lines := <-ch:
		if len(lines) < n {
			t.Fatalf("stdout ended after %q, want %d lines", lines, n)
		}
		return lines
	case <-time.After(10 * time.Second):
		tr.Stdout().Close() // unblocks the reader goroutine
		<-ch
		t.Fatalf("no %d lines on stdout within deadline", n)
	}
	return nil
}

// KillAliveOnCleanup registers a safety net that SIGKILLs (through a
// pidfd, so a recycled pid is never hit) every process still carrying
// mark when the test ends: what a failed test left behind.
func KillAliveOnCleanup(t *testing.T, mark string) {
	t.Helper()
	t.Cleanup(func() {
		for _, pid := range Alive(mark) {
			if fd, err := unix.PidfdOpen(pid, 0); err == nil {
				_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
				_ = unix.Close(fd)
			}
		}
	})
}
