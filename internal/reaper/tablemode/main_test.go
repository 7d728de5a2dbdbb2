//go:build linux

package tablemode

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/procfs"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// TestMain runs the package tests. Like cmd/acpx-sidecar's main, it first
// hands a guardian re-execution of this test binary (the reaper.Supervisor
// of TestNew_RefusedWhileSupervisorReaps uses the default GuardianPath)
// over to the guardian.
func TestMain(m *testing.M) {
	if reaper.MaybeRunGuardian() {
		return
	}
	goleak.VerifyTestMain(m)
}

const (
	termGrace = 200 * time.Millisecond
	killGrace = 2 * time.Second // generous: a bound, not a timed assertion
)

// newMark returns a random marker and an environment carrying it.
func newMark(t *testing.T) (string, []string) {
	t.Helper()
	mark := testmark.New()
	return mark, []string{"PATH=/usr/bin:/bin", "ACPX_TEST_MARK=" + mark}
}

// markedAlive lists live (non-zombie) processes whose environment carries
// the marker.
func markedAlive(mark string) []int {
	want := []byte("ACPX_TEST_MARK=" + mark + "\x00")
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
		if strings.Contains(string(env)+"\x00", string(want)) {
			out = append(out, pid)
		}
	}
	return out
}

// requireNoneAlive is the end-of-test marker scan (leaks are found by
// marker, not by name).
func requireNoneAlive(t *testing.T, mark string) {
	t.Helper()
	if pids := markedAlive(mark); len(pids) > 0 {
		t.Fatalf("processes with marker still alive: %v", pids)
	}
}

// newSup makes a reaper.Supervisor (this process a child subreaper first)
// and registers, LIFO, its Close and a safety net that kills (via pidfd)
// anything a failed test left with its marker.
func newSup(t *testing.T, mode reaper.Mode, mark string) *reaper.Supervisor {
	t.Helper()
	if err := reaper.BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	s, err := reaper.NewSupervisor(reaper.Options{Mode: mode})
	if err != nil {
		t.Skipf("mode %s unavailable: %v", mode, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	t.Cleanup(func() {
		for _, pid := range markedAlive(mark) {
			if fd, err := unix.PidfdOpen(pid, 0); err == nil {
				unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
				unix.Close(fd)
			}
		}
	})
	return s
}

// readLines reads n lines of the tree's stdout, failing after a deadline.
func readLines(t *testing.T, tr interface{ Stdout() io.ReadCloser }, n int) []string {
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

func findProc(term reaper.Termination, pid int) (reaper.ProcessRecord, bool) {
	for _, p := range term.Processes {
		if p.Pid == pid {
			return p, true
		}
	}
	return reaper.ProcessRecord{}, false
}

func sigNames(term reaper.Termination) []string {
	var out []string
	for _, s := range term.Signals {
		out = append(out, s.Signal)
	}
	return out
}
