//go:build linux

package reaper

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// TestMain runs the package tests. Like cmd/acpx-sidecar's main, it first
// hands a guardian re-execution of this test binary (every Supervisor here
// uses the default GuardianPath, os.Executable()) over to the guardian.
// When ACPX_REAPER_MINI_SIDECAR names a mode it acts as the "mini sidecar"
// of TestSidecarKilled_GuardianKillsTree, and with ACPX_REAPER_FORKCHAIN as
// the fork-chain provider of TestGuardianKilled_FastForkChainIsKilled.
func TestMain(m *testing.M) {
	if MaybeRunGuardian() {
		return
	}
	if mode := os.Getenv(miniSidecarEnv); mode != "" {
		os.Exit(miniSidecar(Mode(mode)))
	}
	if dl := os.Getenv(forkChainEnv); dl != "" {
		os.Exit(forkChainMain(dl))
	}
	goleak.VerifyTestMain(m)
}

// newSupervisor is NewSupervisor as cmd/acpx-sidecar calls it: this process
// becomes a child subreaper first.
func newSupervisor(opts Options) (*Supervisor, error) {
	if err := BecomeSubreaper(); err != nil {
		return nil, err
	}
	return NewSupervisor(opts)
}

// TestMaybeRunGuardian_TestBinaryReexecutedAsGuardian: this test binary
// re-executed as `<binary> __guardian` (what a Supervisor starts) is
// dispatched by TestMain before the testing flags are parsed; started
// without the Supervisor's pipes, the guardian refuses and exits 2.
func TestMaybeRunGuardian_TestBinaryReexecutedAsGuardian(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(exe, GuardianArg)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2 (stderr %q)", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "must be started by the sidecar") || stdout.Len() != 0 {
		t.Fatalf("stdout %q, stderr %q: not the guardian's refusal", stdout.String(), stderr.String())
	}
}

// TestNewSupervisor_RequiresSubreaperAndSetsNothing: NewSupervisor does not
// make this process a child subreaper; it refuses with ErrNotSubreaper
// until BecomeSubreaper did.
func TestNewSupervisor_RequiresSubreaperAndSetsNothing(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
		t.Skip("prctl(PR_SET_CHILD_SUBREAPER):", err)
	}
	t.Cleanup(func() {
		if err := BecomeSubreaper(); err != nil {
			t.Error(err)
		}
	})
	s, err := NewSupervisor(Options{})
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	if !errors.Is(err, ErrNotSubreaper) || s != nil {
		t.Fatalf("NewSupervisor in a non-subreaper: %v, want ErrNotSubreaper", err)
	}
	if sub, err := isSubreaper(); err != nil || sub {
		t.Fatalf("after NewSupervisor: subreaper %v (%v), want unchanged false", sub, err)
	}
	if err := BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	if sub, err := isSubreaper(); err != nil || !sub {
		t.Fatalf("after BecomeSubreaper: subreaper %v (%v), want true", sub, err)
	}
	if s, err = NewSupervisor(Options{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
