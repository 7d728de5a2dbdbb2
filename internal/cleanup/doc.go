// Package cleanup is the one path every ending of a provider tree takes:
// a host's session/close, a failed admission, the provider's own exit,
// shutdown, the retained retries of an incomplete cleanup, and the
// recovery of a dead sidecar's leftovers (docs/architecture.md, "Where a
// tree is killed and its proof built").
//
// It owns:
//   - the single Proof builder (Begin, Incomplete, NothingLaunched,
//     ApplyTermination, Finish: proof.go), so every proof has the same
//     shape (docs/protocol.md §12);
//   - the ACP session/close policy, one bounded retry loop (CloseACP,
//     close.go; docs/rules.md#r16, #r20);
//   - the termination of the tree and the retained retry with one backoff
//     (Run, Retain, backoff.go, run.go; docs/rules.md#r15, #r20);
//   - recovery of a ledger entry through the same seam a live tree uses:
//     Run and Retain with a Terminator that recovers the entry (the
//     Manager, internal/adapter/recover.go, builds it from its Launcher's
//     Recoverer);
//   - the hand-off of a finished proof to the key's journal and the host,
//     in that order and only while holding the key (Publish, ProofSink:
//     publish.go).
//
// It runs no process itself: the trees, the ACP connection and the
// journal come in through small interfaces, so the unit tests drive every
// origin with fakes.
package cleanup
