//go:build !linux

package sandbox

// Probe reports no sandbox outside Linux.
func Probe() Caps {
	return Caps{Reason: "Landlock is Linux only", ProcessesReason: "PID namespaces are Linux only"}
}

// Start forks the agent of an empty plan and refuses any other outside
// Linux (*UnsupportedError).
func Start(p *Plan, f Forks) (Started, error) {
	if p.Empty() {
		pid, err := f.Agent(-1)
		return Started{AgentPid: pid}, err
	}
	return Started{}, &UnsupportedError{Missing: []string{"Landlock is Linux only"}}
}

// InitName is argv[0] of a tree's init (Linux only).
const InitName = "acpx-init"

// InitArg is argv[1] of the fallback init (Linux only).
const InitArg = "__nsinit"

// InitMain refuses outside Linux: there are no PID namespaces.
func InitMain([]string) int { return 2 }

// RestrictSelf refuses outside Linux.
func RestrictSelf(int) error { return &UnsupportedError{Missing: []string{"Landlock is Linux only"}} }
