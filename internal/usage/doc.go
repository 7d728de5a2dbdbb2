// Package usage is a session's token usage and cost: the arithmetic of
// what the agent reports and its mapping to and from the session record.
//
// Accounting is a session's cumulative usage, its usage per request id,
// its cumulative cost and its context window (docs/protocol.md §8,
// "session/prompt" and "session/status"; the record's keys in §6), with
// its reads and writes of the record (internal/store's Record and
// TokenUsage). ParseReceipt and TurnReceipts are the usage receipts an
// agent sends on its own extension (docs/protocol.md §24, "Effort,
// thinking and policy breaches": usage receipts), and TurnCost a turn's
// cost from ACP usage_update's cumulative one.
//
// An Accounting and a TurnReceipts are owned by one session actor and used
// only on its goroutine; nothing here locks. The package imports protocol
// and internal/store (the record) and nothing of the session actor
// (internal/session), the Manager (internal/adapter) or the host side
// (internal/rpc).
package usage
