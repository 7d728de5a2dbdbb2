package protocol

// SessionState is a session's state as session/status and session/list
// report it (docs/protocol.md §6, States). The session actor
// (internal/session) moves between them only along the moves its state
// table allows (internal/lifestate).
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
	// StateRetiring: a per-turn (or idle warm) session's tree is being
	// ended and its provider state published (docs/protocol.md §24).
	StateRetiring SessionState = "retiring"
	// StateParked: retired: no tree runs; the session stays admitted and
	// the next call that needs the agent revives it.
	StateParked SessionState = "parked"
	// StateReviving: a call needs the agent: the tree is launched again
	// and the agent's own session resumed.
	StateReviving SessionState = "reviving"
)
