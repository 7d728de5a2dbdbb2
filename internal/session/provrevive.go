package session

import (
	"context"

	"github.com/acpx-sidecar/acpx-sidecar/internal/provstate"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The per-turn side of portable provider state (docs/protocol.md §24):
// what a published retire drops from the key's private HOME, and how a
// revive brings it back from the store before its launch
// (internal/provstate's revive.go). provstate.go has the rest.

// privateStateDirs are the provider-state directories a published retire
// of this per-turn session removes (PROTOCOL §10.2): those its profile
// named (never the open's own stateDirs) that lie in the key's private
// HOME (provstate.PrivateDirs). nil otherwise. On the actor.
func (s *Actor) privateStateDirs(ps *provstate.State) []string {
	if s.life.mode != protocol.LifecyclePerTurn || len(s.plan.Params.StateDirs) > 0 {
		return nil
	}
	return provstate.PrivateDirs(ps, s.end.home)
}

// dropLocalState removes the private-HOME provider state of a retire
// whose publication was read back (provstate.Session.DropLocal).
func (s *Actor) dropLocalState(st *store.Store, rels []string) {
	s.provSession().DropLocal(st, rels)
}

// restoreForRevive is a revive's step with a store (the admission
// worker's, before the launch; provstate.Session.RestoreForRevive).
func (s *Actor) restoreForRevive(ctx context.Context, ps *provstate.State, st *store.Store) *protocol.Error {
	return s.provSession().RestoreForRevive(ctx, ps, st)
}
