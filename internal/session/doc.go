// Package session is one session's actor: a goroutine that owns the
// session's provider process tree, its ACP connection (internal/acpclient)
// and its record, and serves the host's requests the Manager
// (internal/adapter) routes to it, one at a time, in order (Actor's
// methods in api.go; its mailbox, an internal/actor.Mailbox, in mailbox.go).
//
// An actor's state is a few owned parts, each declared in the file that
// works on it: actorLoop (mailbox.go), sessionRecord (record.go),
// controlState (controls.go), turnState (turnstate.go),
// publisher (notify.go), lifecycle (lifecycle.go), sessionEgress
// (egress.go) and cleanupHandoff (close.go); its usage and cost are an
// internal/usage Accounting. The actor carries out the
// open's admission plan (internal/admission) — the launch through the
// Launcher seam and the ACP handshake (internal/launch: launcher.go,
// handshake.go) — runs
// turns (turn.go, queue.go), answers the agent's permission and
// elicitation requests by internal/policy's decisions (permission.go,
// elicitation.go), applies and holds controls (internal/controls),
// publishes and restores provider state (internal/provstate) and closes
// (close.go): how a tree is closed, killed and proven gone, and where its
// proof goes, is internal/cleanup's, which drives internal/reaper.
//
// What every session of one sidecar shares — configuration, host,
// counters, registries — is the Manager's Shared (shared.go); a session
// reaches the Manager only through Shared.Router. It imports nothing of
// internal/adapter or internal/rpc.
package session
