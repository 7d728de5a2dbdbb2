//go:build linux

package proctable

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestLinuxReader_SelfMatchesTheKernel(t *testing.T) {
	r, err := New()
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid != os.Getpid() || p.PPid != os.Getppid() || p.Pgid != syscall.Getpgrp() || p.Start == 0 || p.Zombie {
		t.Fatalf("Stat(self) = %+v; want pid %d ppid %d pgid %d, a start time, not a zombie",
			p, os.Getpid(), os.Getppid(), syscall.Getpgrp())
	}
	if _, err := r.Stat(0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat(0): %v, want ErrNotFound", err)
	}
}

// TestLinuxReader_ChildListedWithGroupEnvironAndZombie: a child in its own
// process group is listed with its parent, group and start time, its
// environment holds the entry it was started with, it is a zombie once it
// exits unreaped, and gone (ErrNotFound) once reaped.
func TestLinuxReader_ChildListedWithGroupEnvironAndZombie(t *testing.T) {
	r, err := New()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sleep", "30")
	cmd.Env = []string{"PATH=/bin", "ACPX_PROCTABLE_TEST=here"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	list, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	var got *Proc
	for i := range list {
		if list[i].Pid == pid {
			got = &list[i]
		}
	}
	if got == nil || got.PPid != os.Getpid() || got.Pgid != pid || got.Start == 0 {
		t.Fatalf("List: child %d listed as %+v; want ppid %d, pgid %d", pid, got, os.Getpid(), pid)
	}
	if st, err := r.Stat(pid); err != nil || st != *got {
		t.Fatalf("Stat(%d) = %+v, %v; List said %+v", pid, st, err, *got)
	}
	// exec.Cmd.Start returns after the execve, so the environment is the
	// child's own.
	env, err := r.Environ(pid)
	if err != nil || !HasEntry(env, "ACPX_PROCTABLE_TEST=here") || HasEntry(env, "ACPX_PROCTABLE_TEST=her") {
		t.Fatalf("Environ(%d) = %q, %v", pid, env, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		st, err := r.Stat(pid)
		if err == nil && st.Zombie && st.Start == got.Start {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed, unreaped child is %+v (%v), want a zombie", st, err)
		}
		time.Sleep(2 * time.Millisecond) // polling /proc, bounded
	}
	_ = cmd.Wait()
	if _, err := r.Stat(pid); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat of the reaped child: %v, want ErrNotFound", err)
	}
	if _, err := r.Environ(pid); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Environ of the reaped child: %v, want ErrNotFound", err)
	}
}

func TestParseStat_CommWithParenthesesAndSpaces(t *testing.T) {
	line := "42 (a) (b c) S 7 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 123456 0 0"
	p, ok := parseStat([]byte(line))
	if !ok || p.PPid != 7 || p.Pgid != 42 || p.Start != 123456 || p.Zombie {
		t.Fatalf("parseStat = %+v, %v", p, ok)
	}
	if _, ok := parseStat([]byte("42 (x) Z 1")); ok {
		t.Fatal("a short line parsed")
	}
	// A leader thread that exited while another thread runs (or still
	// tears the process down) shows 'Z': not a zombie until it is the last.
	for threads, zombie := range map[string]bool{"1": true, "2": false, "6": false} {
		line := "42 (x) Z 7 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 " + threads + " 0 123456 0 0"
		if p, ok := parseStat([]byte(line)); !ok || p.Zombie != zombie {
			t.Errorf("state Z with %s threads: %+v %v, want zombie %v", threads, p, ok, zombie)
		}
	}
}
