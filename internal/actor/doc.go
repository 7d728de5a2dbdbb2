// Package actor is the machinery of a session actor that is not about
// what a session does: the Mailbox that carries host commands to the
// actor's goroutine without ever blocking the sender, and hands back the
// replies of the commands that never ran; and the ByteGate that bounds the
// agent bytes queued between a provider's read loop and its actor, so a
// slow actor is backpressure on the agent, not memory (docs/protocol.md
// §20). Both are safe to use from any goroutine.
//
// It imports nothing of the session (internal/session), the Manager
// (internal/adapter) or the host side (internal/rpc, protocol): what it
// queues is a func() and what it answers with is a Reply.
package actor
