// Package cgroup is the reaper's cgroup handling (Linux; the limit types
// build everywhere): every read and write of cgroup v2 files for a
// provider tree — the writable cgroup2 mount (Mount), the one place a
// provider cgroup is made (NewProvider), cgroup.events (Populated),
// cgroup.procs (Procs, TreeProcs), the one cgroup.kill writer
// (WriteKill), removal deepest first (RemoveSubtree) — the event-driven
// wait for "populated 0" (Watcher, WaitEmpty: one inotify instance per
// process), and the resource limits of docs/protocol.md §18.2: Limits
// written into a provider's v2 cgroup before the fork (ApplyLimits) or,
// on a hybrid host whose cgroup2 hierarchy lacks a controller, into a
// cgroup v1 cgroup of the provider (MakeV1Limits; docs/architecture.md,
// "Limits on cgroup v1"), and read back as Resources (ReadResources).
//
// It knows nothing of processes or trees: internal/reaper decides what
// is killed and when (docs/architecture.md, "Containment at scale").
// Error messages keep the "reaper: " prefix they had before the package
// was split out of internal/reaper.
package cgroup
