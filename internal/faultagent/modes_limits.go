package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// limitModes are the resource-abuse modes (docs/protocol.md §18.2 limits):
//
//	turn-hog=<MiB>       each turn, after its first chunk, the agent itself
//	                     allocates and touches that much memory in 1 MiB
//	                     steps (a memory hog: under limits.memoryBytes the
//	                     kernel OOM-kills it, at memory.max on cgroup v2 or
//	                     memory.limit_in_bytes on a hybrid host's cgroup
//	                     v1, where no swap is left to dodge into), then
//	                     reports
//	                     "hog: touched <MiB> MiB"
//	turn-forkbomb=<N>    each turn starts up to N children (this binary
//	                     re-executed as a sleeper that ignores SIGTERM) until
//	                     a fork fails, then reports
//	                     "forkbomb: started <k> (<error or "all">)"; the
//	                     children stay until the tree is killed
type limitModes struct {
	turnHogMiB   int
	turnForkBomb int
}

// parse sets turn-hog or turn-forkbomb from val.
// Not shared with the other families' parse (modes_attack.go, modes_seed.go): each switch sets its own family's fields.
func (m *limitModes) parse(name, val string, hasVal bool) error {
	n, err := strconv.Atoi(val)
	if !hasVal || err != nil || n < 1 {
		return fmt.Errorf("mode %s needs =<positive number>", name)
	}
	switch name {
	case "turn-hog":
		m.turnHogMiB = n
	case "turn-forkbomb":
		m.turnForkBomb = n
	default:
		return fmt.Errorf("unknown mode %q", name)
	}
	return nil
}

// turnHog keeps the memory of turn-hog reachable.
var turnHog [][]byte

// runTurnHog allocates and touches mib MiB, 1 MiB at a time.
func runTurnHog(mib int) string {
	for i := 0; i < mib; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		turnHog = append(turnHog, b)
	}
	return fmt.Sprintf("hog: touched %d MiB", mib)
}

// runForkBomb starts up to n sleeper children (grandchildFlag: they
// ignore SIGTERM) and stops at the first failure (EAGAIN at pids.max, the
// same in cgroup v2 and v1).
func runForkBomb(n int) string {
	self, err := os.Executable()
	if err != nil {
		return "forkbomb: started 0 (" + err.Error() + ")"
	}
	started := 0
	for ; started < n; started++ {
		cmd := exec.Command(self, grandchildFlag)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // away from the provider's group, still in its cgroup
		if err := cmd.Start(); err != nil {
			why := err.Error()
			if errors.Is(err, syscall.EAGAIN) {
				why = "EAGAIN"
			}
			return fmt.Sprintf("forkbomb: started %d (%s)", started, why)
		}
		// Not waited for here: a goroutine per child would need threads
		// the pids limit refuses; the tree's reaper collects them.
		_ = cmd.Process.Release()
	}
	return fmt.Sprintf("forkbomb: started %d (all)", started)
}
