package protocol

// SessionState is a session's state as session/status and session/list
// report it (docs/protocol.md §6, States). The session actor
// (internal/adapter) moves between them only along the moves its state
// table allows.
type SessionState string

// Session states.
const (
	// StateAdmitting: session/open is still running (launch, handshake,
	// record).
	StateAdmitting SessionState = "admitting"
	// StateOpen: admitted and idle.
	StateOpen SessionState = "open"
	// StateTurn: a prompt turn is running.
	StateTurn SessionState = "turn"
	// StateClosing: a close (host, shutdown) is cleaning up.
	StateClosing SessionState = "closing"
	// StateClosed: closed with a proof (complete or retained).
	StateClosed SessionState = "closed"
	// StateDead: the provider exited on its own; prompts are refused.
	StateDead SessionState = "dead"
)
