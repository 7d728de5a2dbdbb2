package session

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/provstate"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Which directories are a session's provider state (docs/protocol.md §24):
// resolved from the open or the agent's profile, refused where an archive
// must never read or a restore write, and held by one live session at a
// time. internal/provstate resolves and checks them, and publishes and
// restores them.

// stateSources resolves the open's provider-state directories in the
// launch environment env and refuses those no archive may carry
// (provstate.Sources): the session's own private HOME (s.end.home, set by
// setupSandbox first) is the one place under a state dir allowed. One
// another live session of this sidecar uses is refused too
// (Shared.ProvDirs.Claim).
func (s *Actor) stateSources(env []string) ([]statestore.Source, *protocol.Error) {
	return provstate.Sources(provstate.Dirs{Named: s.plan.Params.StateDirs, Profile: s.plan.Profile, Env: env, Cwd: s.plan.Params.Cwd,
		PrivateHome: s.end.home, StateDirs: s.m.stateDirs(s.stateDir), Secrets: s.m.Config.StateSecrets})
}
