// Package session is one session's actor: a goroutine that owns the
// session's provider process tree, its ACP connection (internal/acpclient)
// and its record, and serves the host's requests the Manager
// (internal/adapter) routes to it, one at a time, in order (Actor's
// methods in api.go; its mailbox, an internal/actor.Mailbox, in mailbox.go).
//
// An actor's state is a few owned parts, each declared in the file that
// works on it: actorLoop (mailbox.go), its life's state machine
// (internal/lifestate; moveTo in state.go), sessionRecord (record.go),
// controlState (controls.go), turnState (turnstate.go), its out-queue to
// the host (an internal/outbox Publisher; notify.go), lifecycle
// (lifecycle.go), sessionEgress (egress.go), cleanupHandoff (close.go)
// and its usage and cost (an internal/usage Accounting).
//
// The actor wires the rooms below it: it keeps the open's admission plan
// (internal/admission) and has internal/launch carry it out — the launch
// through the Launcher seam and the ACP handshake, off the actor
// (admission.go, admitinput.go, admitside.go) —; runs turns (turn.go,
// queue.go); answers the agent's permission and elicitation requests by
// internal/policy's decisions (permission.go, elicitation.go); applies and
// holds controls (internal/controls); publishes and restores provider
// state (internal/provstate); and closes (close.go): how a tree is closed,
// killed and proven gone, and where its proof goes, is internal/cleanup's,
// which drives internal/reaper.
//
// What every session of one sidecar shares — configuration
// (internal/config), host, counters (internal/stats), registries
// (internal/registry) — is the Manager's Shared (shared.go); a session
// reaches the Manager only through Shared.Router. It imports nothing of
// internal/adapter or internal/rpc.
package session
