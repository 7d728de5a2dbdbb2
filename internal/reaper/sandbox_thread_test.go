//go:build linux

package reaper

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/acpx-sidecar/acpx-sidecar/internal/launchexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// TestForkSandboxed_RestrictsTheChildAndNoThreadOfOurs: a provider forked
// by forkSandboxed runs inside the plan from its first instruction (it can
// write only where the rules let it, and has no_new_privs), while this
// process keeps no restricted thread (the one that applied the plan ends
// with its goroutine: no task of ours shows NoNewPrivs 1) and still
// writes where the child cannot; a plan the kernel refuses forks nothing
// and wraps launchexec.ErrSandbox.
func TestForkSandboxed_RestrictsTheChildAndNoThreadOfOurs(t *testing.T) {
	if sandbox.Probe().LandlockABI == 0 {
		t.Skip("no Landlock on this kernel")
	}
	allowed, denied := t.TempDir(), t.TempDir()
	plan := &sandbox.Plan{HandledFS: ll.AccessFSWriteFile | ll.AccessFSMakeReg,
		FS: []sandbox.Rule{{Path: allowed, Access: ll.AccessFSWriteFile | ll.AccessFSMakeReg}}}
	script := "echo a > " + allowed + "/ok; echo b > " + denied + "/no; grep NoNewPrivs /proc/self/status > " + allowed + "/nnp"
	attr := &syscall.ProcAttr{Env: []string{"PATH=/usr/bin:/bin"}, Files: []uintptr{0, 1, 2}}
	pid, err := forkSandboxed(plan, "sh", "/bin/sh", []string{"sh", "-c", script}, attr)
	if err != nil {
		t.Fatal(err)
	}
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if _, err := os.Stat(filepath.Join(allowed, "ok")); err != nil {
		t.Fatalf("the child could not write where its rules allow: %v", err)
	}
	if _, err := os.Stat(filepath.Join(denied, "no")); err == nil {
		t.Fatal("the child wrote outside its rules: the sandbox did not hold")
	}
	if b, _ := os.ReadFile(filepath.Join(allowed, "nnp")); !strings.Contains(string(b), "1") {
		t.Fatalf("the child's no_new_privs: %q", b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		restricted := ""
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
			if err == nil && strings.Contains(string(b), "NoNewPrivs:\t1") {
				restricted = task.Name()
			}
		}
		if restricted == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %s of this process is still restricted", restricted)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(denied, "ours"), []byte("x"), 0o600); err != nil {
		t.Fatalf("this process lost access the child's sandbox denies: %v", err)
	}
	bad := &sandbox.Plan{HandledFS: ll.AccessFSWriteFile, FS: []sandbox.Rule{{Path: filepath.Join(denied, "missing"), Access: ll.AccessFSWriteFile}}}
	if pid, err := forkSandboxed(bad, "sh", "/bin/sh", []string{"sh", "-c", "exit 0"}, attr); !errors.Is(err, launchexec.ErrSandbox) {
		t.Fatalf("a plan that cannot be applied: pid %d, err %v, want launchexec.ErrSandbox", pid, err)
	}
}
