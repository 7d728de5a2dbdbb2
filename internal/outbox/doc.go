// Package outbox is a session's outgoing side: every notification a
// session actor sends the host leaves through its Publisher, which appends
// it to the session key's journal (internal/journal, shared through
// internal/registry's Journals), queues its frame, and on Flush hands the
// journal's buffer to the kernel in one write(2) — so an entry is in the
// kernel before its frame is in the host's pipe — then the queued frames
// to the host in one write when the host is a BatchHost: a burst of
// updates costs one journal write and one host write (docs/protocol.md
// §16, "Session journal and session/events"; docs/architecture.md,
// "Update path"). It also keeps the session's update sequence and the
// write health of its journal, record and ownership-ledger entry, and
// tells the host when one degrades or works again (session/journal,
// docs/protocol.md §16).
//
// Text an agent wrote is redacted here before it is journaled or framed
// (docs/protocol.md §13; docs/rules.md#r3): an update's agent part in
// EmitUpdate, every other notification's params whole in the queue.
//
// A Publisher is owned by one session actor and used only on its
// goroutine; it holds no session. What it reads off the session and its
// Manager — the session id and key, the store's sessions directory, the
// journals registry, the host, the redactor, the logger, the
// updates-forwarded counter — is given to New (Config); the session's
// state checks are passed per call. It may import protocol, journal,
// jsonl, redact, registry and zap — never internal/adapter, rpc or reaper.
//
// The name: "publish" already means a proof's delivery
// (internal/cleanup.Publish), a provider-state archive's
// (internal/provstate) and the actor's status snapshot (internal/session's
// Actor.publish); this package is the actor's out-queue, the names in
// it (out, outBuf, the session's old flushOut) were already its own.
package outbox
