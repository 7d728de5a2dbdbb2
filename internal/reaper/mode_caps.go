package reaper

// ModeProcessTable is the containment of hosts without cgroups or a child
// subreaper — macOS (docs/protocol.md §9 "Containment on macOS";
// docs/operations.md, "macOS"): the provider gets its own process group;
// the tree is tracked by scanning the process table (parent chains from
// tracked processes, the group, and the session's environment marker read
// back from each process); it is killed by group (while the leader pins
// the group id) and by pid (each pid re-checked against its start time);
// it is proven gone by two scans a reap cycle apart that find nothing of
// it. It runs on Linux too, with --containment=process-table, so the
// e2e suite runs the algorithm here. It cannot enforce limits or a
// sandbox (SandboxSupported), and there is no watchdog: if the sidecar dies, the next sidecar
// on the same stateDir kills what is left from the ownership ledger
// (internal/reaper/tablemode Recover).
const ModeProcessTable Mode = "process-table"

// EnforcesLimits reports whether containment m can enforce session/open
// `limits` at all (docs/protocol.md §18.2): only ModeCgroup, and there
// only where the controllers exist (LimitsSupported).
func (m Mode) EnforcesLimits() bool { return m == ModeCgroup }
