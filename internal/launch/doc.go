// Package launch carries out an admission: it launches the provider tree
// of a session/open (or a revive) under containment and runs the ACP
// handshake with it (docs/protocol.md §8 session/open, §23 and §24;
// docs/rules.md#r1, #r5–#r10, #r16), and it is the Launcher/Tree seam the
// session actors and their workers see of internal/reaper.
//
// The plan of the open (what to launch, its environment, sandbox and
// limits) is internal/admission's; the session actor (internal/session)
// makes an Input on the actor, runs Worker.Admit off it, and adopts the
// Result. The steps that need the session's own state (the provider
// state's lease, the live-tree slot, the ownership ledger, the
// connection's routing, the cleanup) are behind the Session interface.
//
// This package imports nothing of internal/adapter, internal/session (the
// session actor) or internal/rpc: only the leaf packages (acpclient,
// admission, controls, provstate, store, reaper, sandbox, cleanup, profiles,
// protocol …).
package launch
