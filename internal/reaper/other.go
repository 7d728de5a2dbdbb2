//go:build !linux

package reaper

import (
	"context"
	"io"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Detect reports every mode unavailable: containment needs Linux
// (docs/rules.md#r2).
func Detect() []Mechanism {
	const r = "requires Linux (cgroup v2, prctl, pidfd)"
	return []Mechanism{{Mode: ModeCgroup, Reason: r}, {Mode: ModeSubreaper, Reason: r}, {Mode: ModeProcessGroup, Reason: r}}
}

// guardianEntry returns 2 at once: there is no guardian on this platform.
func guardianEntry([]string) int { return 2 }

// BecomeSubreaper always fails with ErrUnsupported on this platform.
func BecomeSubreaper() error { return ErrUnsupported }

// Supervisor is unavailable on this platform.
type Supervisor struct{}

// NewSupervisor always fails with ErrUnsupported on this platform
// (docs/rules.md#r2: the caller reports PLATFORM_UNSUPPORTED).
func NewSupervisor(Options) (*Supervisor, error) { return nil, ErrUnsupported }

// CheckCgroupParent reports ErrUnsupported: no cgroups here.
func CheckCgroupParent(string) error { return ErrUnsupported }

// Mode is "" on this platform.
func (s *Supervisor) Mode() Mode { return "" }

// Seal does nothing on this platform.
func (s *Supervisor) Seal() {}

// Close does nothing on this platform.
func (s *Supervisor) Close() error { return nil }

// Start always fails with ErrUnsupported on this platform.
func (s *Supervisor) Start(Spec) (*Tree, error) { return nil, ErrUnsupported }

// Tree is never created on this platform.
type Tree struct{}

// Info is zero on this platform.
func (t *Tree) Info() TreeInfo { return TreeInfo{} }

// Stdio is zero on this platform.
func (t *Tree) Stdio() Stdio { return Stdio{} }

// Stdin is nil on this platform.
func (t *Tree) Stdin() io.WriteCloser { return nil }

// Stdout is nil on this platform.
func (t *Tree) Stdout() io.ReadCloser { return nil }

// Stderr is nil on this platform.
func (t *Tree) Stderr() io.ReadCloser { return nil }

// Pid is 0 on this platform.
func (t *Tree) Pid() int { return 0 }

// Pgid is 0 on this platform.
func (t *Tree) Pgid() int { return 0 }

// StartTicks is 0 on this platform.
func (t *Tree) StartTicks() uint64 { return 0 }

// StartedAt is zero on this platform.
func (t *Tree) StartedAt() time.Time { return time.Time{} }

// Containment is "" on this platform.
func (t *Tree) Containment() Mode { return "" }

// CgroupPath is "" on this platform.
func (t *Tree) CgroupPath() string { return "" }

// Exited is nil on this platform.
func (t *Tree) Exited() <-chan struct{} { return nil }

// ExitStatus is zero on this platform.
func (t *Tree) ExitStatus() ExitStatus { return ExitStatus{} }

// Terminate reports an incomplete result on this platform.
func (t *Tree) Terminate(context.Context, time.Duration, time.Duration) Termination {
	return Termination{Errors: []ErrorRecord{{Code: string(protocol.ErrPlatformUnsupported), Message: ErrUnsupported.Error()}}}
}

// SweptCgroup: see the Linux SweepDeadParents.
type SweptCgroup struct {
	// Dir is the cgroup's directory.
	Dir string
	// Pids are the processes that were in it.
	Pids []int
	// Removed is true when it was observed empty and removed.
	Removed bool
}

// SweepDeadParents does nothing off Linux.
func SweepDeadParents(time.Duration) []SweptCgroup { return nil }

// CgroupParent is "" off Linux.
func (s *Supervisor) CgroupParent() string { return "" }

// Recover is unsupported off Linux.
func Recover(Leftover, time.Duration) (Termination, error) { return Termination{}, ErrUnsupported }

// Resources fails on this platform: there is no cgroup.
func (t *Tree) Resources() (Resources, error) { return Resources{}, ErrUnsupported }

// limitsExecMain: there are no cgroup v1 limits on this platform.
func limitsExecMain([]string) int { return 2 }
