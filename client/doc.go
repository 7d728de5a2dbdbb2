// Package client is a Go host library for acpx-sidecar: it spawns the
// sidecar, speaks its JSON-RPC 2.0 protocol (docs/protocol.md) over the
// sidecar's stdin/stdout with NDJSON framing (github.com/sourcegraph/jsonrpc2
// with a line codec), and answers the sidecar's permission requests.
//
//	c, err := client.Start(ctx, client.Options{Binary: "/usr/bin/acpx-sidecar", StateDir: dir})
//	s, err := c.Open(ctx, client.OpenParams{SessionKey: "run-42", Agent: "codex",
//		Command: client.Command{Path: codexACP}, Cwd: workspace})
//	res, err := s.Prompt(ctx, client.PromptParams{RequestID: "t1", Prompt: "hello"},
//		func(u client.Update) { fmt.Println(u.Seq, u.Kind()) })
//	proof, err := s.Close(ctx, client.CloseParams{Reason: "done"})
//	proofs, err := c.Shutdown(ctx) // shutdown, exit, wait; c.ExitCode() is then 0
//
// # Types
//
// The wire types a host reads (OpenResult, PromptResult, StatusResult,
// Proof, Exited, …) are aliases of the public package protocol's, which
// the sidecar itself uses, with the JSON names of docs/protocol.md and of
// the JSON Schema docs/protocol.schema.json. The types a host fills in
// (OpenParams, Command, Limits, PromptParams, CloseParams) and the decoded
// notifications and permission requests (Update, PermissionRequest,
// PermissionOutcome) are this package's own, shaped for Go callers: the
// session is implied by the *Session, unset values are zero values.
// Members the protocol passes through verbatim (ACP updates, tool calls,
// config options, agent capabilities, MCP servers) are json.RawMessage.
// Times are protocol.Time, which embeds time.Time.
//
// # Extensions and the agent's own sessions
//
// docs/protocol.md §23: Options.OnExtRequest answers the agents' `_…`
// requests (Initialize then declares capabilities.extRequests) and
// Options.OnExtNotification gets their `_…` notifications;
// Session.ExtRequest and Session.ExtNotify call the agent's own;
// Session.AgentSessions pages the agent's ACP session/list and
// OpenParams.AgentSessionID resumes one of those sessions. OpenParams.Meta
// and PromptParams.Meta reach the agent's _meta; OpenParams.AuthMethod
// runs one of OpenResult.AuthMethods (AUTH_REQUIRED lists them in Data when
// the agent needs one the open did not name).
//
// # Per-turn sessions and the state store
//
// docs/protocol.md §24: an open with Lifecycle &Lifecycle{Mode:
// LifecyclePerTurn} keeps the agent's process tree only while a turn
// needs it. After each turn the sidecar retires the tree (its cleanup
// proof, origin "retire", goes to OnProof) and the session is parked
// under the same id; the next Prompt (or SetModel, SetMode, …) revives
// it: a new tree that resumes the agent's own ACP session. The
// session/lifecycle notices (parked, reviving, live) go to
// Options.OnLifecycle, Session.Lifecycle returns the latest, and
// Session.WaitLifecycle(ctx, LifecycleParked) waits for the retire after
// a Prompt. Status reports the mode, state, retires and revives
// (StatusResult.Lifecycle); Client.Stats the parked sessions and live
// trees. With a state store (the sidecar's --state-store file:///dir or
// s3://…, and --state-key-file), every retire and close also publishes
// the agent's provider-state directories (the profile's, or
// OpenParams.StateDirs), encrypted, and the proof's Publication says
// what was published; an open of the same key on another sidecar restores
// them first (OpenResult.Restore) and its agent remembers. Failures a
// host switches on: SESSION_LOST (a revive could not resume the agent's
// session; the session is closed), SIDECAR_AT_CAPACITY (no live-tree slot
// within ReviveWaitMs; retryable, the session stays parked),
// STATE_FENCED, STATE_CORRUPT, STATE_TOO_LARGE, STATE_CONFLICT and
// STATE_STORE_UNAVAILABLE (protocol.ErrSessionLost, protocol.ErrState…).
//
// # Lower level
//
// Call, Send and Notify speak any method, including ones this package has
// no wrapper for; Spawn and Initialize split Start; OnRequest answers
// sidecar requests at the JSON-RPC level; OnFrame taps every frame both
// ways (raw bytes in wire order), and WriteRaw and CloseInput write
// malformed input and end stdin, for tests of a sidecar.
//
// # Errors
//
// Every error returned is a *Error. Errors the sidecar answered carry its
// JSON-RPC Code, Message, data.code as DataCode and data verbatim as Data
// (docs/protocol.md §5): switch on DataCode. Errors made here have Code 0
// and DataCode DataCodeTransport (pipes closed, sidecar gone),
// DataCodeCancelled (the context ended; Unwrap gives the context error),
// DataCodeBadResult, DataCodeStart (for a sidecar that exits before
// answering initialize, with its exit status and the end of its stderr)
// or DataCodeExitStatus. One more kind is made here with the sidecar's
// own code: a frame the sidecar would answer with id null
// (docs/protocol.md §3 Bad frames), so that its caller would wait forever,
// is never sent; the call fails at once with Code -32600 and DataCode
// INVALID_REQUEST. That is a frame over the sidecar's frame limit
// (initialize capabilities.maxFrameBytes; the message names the frame's
// size and the limit), params that are not a JSON object, array or null,
// and an empty method (see Error).
//
// # Cancellation
//
// A call whose ctx ends returns DataCodeCancelled; the sidecar is sent
// $/cancelRequest for it. Two calls keep following the request after
// that, because its answer matters: Open returns at once and delivers the
// cleanup proof of the aborted admission (or closes a session admitted
// anyway, and delivers that proof) to Options.OnProof; Prompt waits,
// bounded by the sidecar's closeTimeoutMs plus 2 s, for the turn's final
// answer and returns it with the error, so that the session is free for
// the next turn when Prompt returns.
//
// # Notifications and callbacks
//
// session/update notifications of a turn go to the Prompt call running it
// (or PromptBatches, a slice at a time), on its goroutine, in seq order and
// before Prompt returns. They are read on a fast path ahead of the
// JSON-RPC library (updates.go): one validating scan per frame, no
// reflection, and one wake-up of the Prompt goroutine per read of the
// sidecar's stdout rather than per update. Every other notification goes
// to the Options callbacks (OnUpdate, OnProof, OnExited, OnDecision,
// OnJournal, OnLifecycle), run one at a time in wire order on a goroutine
// of this package; session/requestPermission goes to OnPermission, each request on
// its own goroutine, with a ctx that ends once the sidecar has settled the
// ask without the host (its timeout, a cancel, the turn's end, a close,
// shutdown; see Options.OnPermission). Callbacks may call the Client.
// Done is closed only after every callback has returned.
//
// # Elicitation and withdrawn requests
//
// Options.OnElicitation answers session/elicitation, an agent's ACP
// elicitation/create (docs/protocol.md §22): with it, Initialize declares
// capabilities.elicitation (Options.ElicitationModes, else form and url)
// and agents are offered exactly those modes. Answer with Accept (the
// form's values, checked by the sidecar against the requested schema),
// Decline or CancelElicitation. OnElicitationDecided receives every
// outcome's audit, OnElicitationComplete an agent's finished url
// interaction. When the agent withdraws a request the sidecar put to this
// host (ACP $/cancel_request; permission or elicitation), the sidecar
// sends $/cancelRequest for it and the handler's ctx ends; its answer is
// then ignored.
package client
