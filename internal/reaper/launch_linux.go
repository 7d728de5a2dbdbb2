//go:build linux

package reaper

// A provider that needs work done inside its own process before its first
// instruction (cgroup v1 limits to join, a sandbox to apply) is forked,
// still straight into its v2 cgroup (CLONE_INTO_CGROUP), as the launch
// entry of the sidecar binary (internal/launchexec), which does that work
// and execve's the real provider with the same pid. Start reads its
// status pipe: EOF with nothing written means the execve succeeded;
// otherwise the entry wrote why and exits launchexec.Failed, and Start
// fails with nothing left running. docs/architecture.md, "Limits on
// cgroup v1" and "Kernel sandbox".

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/launchexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// v1Procs are the cgroup.procs files of the v1 limit cgroups to join, in
// order (pids last).
func v1Procs(v1 map[string]string) []string {
	var out []string
	for _, c := range []string{"memory", "cpu", "pids"} {
		if d, ok := v1[c]; ok {
			out = append(out, filepath.Join(d, "cgroup.procs"))
		}
	}
	return out
}

// planJSON is the sandbox plan as the launch entry's argument ("" for
// none or an empty plan).
func planJSON(p *sandbox.Plan) string {
	if p.Empty() {
		return ""
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// awaitLaunch waits for t's launch entry to report (EOF: the provider
// runs, inside its limits and sandbox). On a failure or timeout the
// process is killed with its v2 cgroup and reaped, the tree unregistered,
// and the error returned, wrapping launchexec.ErrSandbox for a sandbox
// failure (the caller removes the cgroups). s.mu held.
func (s *Supervisor) awaitLaunch(t *Tree, status *os.File, path string) error {
	err := launchexec.ReadStatus(status, path)
	if err == nil {
		return nil
	}
	_ = cgroup.WriteKill(t.cg.path)
	select {
	case <-t.exited:
	case <-time.After(launchexec.Timeout):
		s.log.Warn("reaper: launch entry process not reaped", zap.Int("pid", t.id.pid))
	}
	cgroup.WaitEmpty(s.c.watch, nil, nil, t.cg.path, time.Second, nil)
	s.c.unregister(t)
	t.closeFDs()
	return fmt.Errorf("reaper: %w", err)
}
