// Package registry holds the tables internal/adapter's Manager shares with its
// session actors (internal/session, through session.Shared): the stores of the
// state directories and the recoveries still running (Stores, Recoveries), the
// session-key flocks and open session journals shared by reference count
// (KeyLocks, Journals), the live-tree slots (LiveTrees, docs/protocol.md §24),
// the writable roots of live sandboxed trees (Sandboxes, docs/protocol.md
// §19), the provider-state directories of live sessions (ProviderDirs,
// docs/protocol.md §24) and the spare private TMPDIRs made ahead of need
// (TmpSpares, SpareRefills). Each type is safe for concurrent use and guards
// itself with its own mutex; none starts a goroutine but SpareRefills, whose
// one goroutine ends when no refill is left.
//
// The package knows nothing of sessions: an owner is named by its session
// id (a plain string, unique per session of one sidecar), and a registry
// takes what it needs of a session — its state dir, its key — as plain
// values. It imports internal/store, internal/journal, internal/statestore,
// internal/fspath, protocol, zap and golang.org/x/sys; never
// internal/adapter, rpc or reaper.
package registry
