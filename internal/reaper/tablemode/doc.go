// Package tablemode is the process-table containment,
// reaper.ModeProcessTable: the containment of hosts without cgroups or a
// child subreaper — macOS — and, selected with
// --containment=process-table, of Linux too (docs/protocol.md §9
// "Containment on macOS"; docs/operations.md, "macOS";
// docs/architecture.md, "Containment at scale").
//
// A tree is what the process table says it is: the provider's own process
// group while its id is pinned, every process carrying the tree's
// environment marker, and their descendants by parent chain (Tree.update,
// the rules in one function). Supervisor launches trees; Tree.Terminate
// kills one by group and by pid (each pid re-checked against its start
// time) and proves it gone by two scans a reap cycle apart; Recover does
// the same for a tree of a dead sidecar from its ownership-ledger entry
// (there is no watchdog in this mode). Detect is its line of
// `acpx-sidecar doctor`.
//
// It shares the proof's types (reaper.Spec, reaper.Termination, …) with
// internal/reaper, whose *reaper.Tree and this package's *Tree are the
// two implementations of internal/launch's Tree. One waiter per process
// reaps every child (table_linux.go, table_darwin.go), so New refuses
// while a reaper.Supervisor runs (reaper.ReapsChildren).
package tablemode
