package session

import (
	"os"
	"slices"

	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// setupSandbox is launch.SetupSandbox for this session (on the actor).
func (s *Actor) setupSandbox(p protocol.OpenParams, env []string) (launch.Sandbox, []string, *protocol.Error) {
	m := s.m
	return launch.SetupSandbox(launch.SandboxSite{ID: s.id, Key: s.key, Config: &m.Config.Sandbox, Launcher: m.Config.Launcher,
		Store: s.rec.st, Live: m.Sandboxes, StateDirs: m.stateDirs, SpareTmp: m.TmpSpares.Take, RefuseAllow: m.refuseAllow,
		JoinEgress: func(list []string) (int, []string, *protocol.Error) {
			fd, l, e := s.joinEgress(list)
			if e != nil {
				return fd, nil, e
			}
			return fd, l.Strings(), nil
		}, Rules: &s.end.rules}, p, env)
}

// stateDirs are every state dir this sidecar uses: --state-dir, every
// store opened so far, and extra ("" skipped).
func (m *Shared) stateDirs(extra string) []string {
	out := []string{}
	for _, d := range append([]string{m.Config.StateDir, extra}, m.Stores.Dirs()...) {
		if d != "" {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// releaseSandbox is called once the session's tree is proven gone:
// its writable roots are forgotten (nothing is left to write them:
// registries.go) and its private TMPDIR is removed (docs/protocol.md
// §19).
func (s *Actor) releaseSandbox() {
	s.m.Sandboxes.Forget(s.id)
	if s.end.tmpDir != "" {
		_ = os.RemoveAll(s.end.tmpDir)
	}
}
