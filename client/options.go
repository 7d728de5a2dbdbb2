package client

import (
	"context"
	"encoding/json"
	"io"
)

// Options say how Start runs the sidecar and where its notifications go.
// Every callback but OnFrame runs on a goroutine of this package, never on
// the connection's read loop, so it may call the Client; OnProof,
// OnExited, OnUpdate, OnDecision and OnJournal run one at a time, in wire
// order.
type Options struct {
	// Binary is the path of the acpx-sidecar executable (required).
	Binary string
	// StateDir, when set, is passed as --state-dir (absolute).
	StateDir string
	// Args are more command-line flags (docs/protocol.md §2), after
	// --state-dir. Only ndjson framing is supported: no --framing lsp.
	Args []string
	// Env is the sidecar's environment ("K=V"); nil inherits this
	// process's. Providers get of it what the sidecar's --inherit-env
	// policy passes on (docs/protocol.md §18.1; OpenParams.InheritEnv).
	Env []string
	// OnPermission answers session/requestPermission. When it is set, Start
	// declares capabilities.permissionRequests, and each request is
	// answered with what it returns, on its own goroutine. ctx ends as soon
	// as the sidecar no longer waits for this answer, and OnPermission
	// should then return (what it returns is still sent, and the sidecar
	// ignores it, docs/protocol.md §9): when a session/permission notice
	// decides this ask without the host (same session, RequestID and
	// toolCallId; decision "timeout" after permissionTimeoutMs, §18.3, or
	// "cancelled" for a cancel, close, shutdown or turn end), when the
	// turn's session/prompt result arrives, when the session is closed
	// (session/close result or CLEANUP_INCOMPLETE) or its provider exits
	// (session/exited), after shutdown's result, and when the connection
	// closes. When nil, escalations follow each session's
	// nonInteractivePermissions (and a request, should one come, is
	// answered Cancelled()).
	OnPermission func(ctx context.Context, req PermissionRequest) PermissionOutcome
	// OnElicitation answers session/elicitation: an agent's ACP
	// elicitation/create (docs/protocol.md §22). When it is set, Start
	// declares capabilities.elicitation (ElicitationModes, else both form
	// and url), and each request is answered with what it returns, on
	// its own goroutine. ctx ends as soon as the sidecar no longer waits
	// for the answer, and OnElicitation should then return: when the
	// sidecar sends $/cancelRequest for it (the agent withdrew it, or its
	// elicitationTimeoutMs ran out), and in the cases listed for
	// OnPermission (the turn's result, close, exit, shutdown). When nil
	// (and OnRequest is nil) no elicitation is declared and agents are
	// not offered it.
	OnElicitation func(ctx context.Context, req ElicitationRequest) ElicitationResponse
	// ElicitationModes, when set, are the modes declared instead of both
	// (all false: none).
	ElicitationModes *ElicitationModes
	// OnElicitationDecided receives session/elicitationDecided audit
	// notices.
	OnElicitationDecided func(ElicitationDecided)
	// OnElicitationComplete receives session/elicitationComplete notices:
	// an agent finished a url elicitation.
	OnElicitationComplete func(ElicitationComplete)
	// OnProof receives cleanup/proof notifications: provider-exit, late
	// handshake, retained and recovered cleanups (docs/protocol.md §9),
	// and the proofs of Opens whose ctx ended before the sidecar answered
	// (the admission's cleanup proof, or the close of a session admitted
	// anyway; see Client.Open).
	OnProof func(Proof)
	// OnExited receives session/exited notifications.
	OnExited func(Exited)
	// OnLifecycle receives session/lifecycle notifications
	// (docs/protocol.md §24): a per-turn (or idle-retired warm) session
	// parked (with the retire's proof, or a failed revive's error),
	// reviving, or live again. Session.WaitLifecycle waits for one
	// state without a callback.
	OnLifecycle func(LifecycleNotice)
	// OnPolicyBreach receives session/policyBreach notifications: an agent
	// moved a held control (docs/protocol.md §24).
	OnPolicyBreach func(PolicyBreachNotice)
	// OnNetwork receives session/network notifications: the audit of a
	// tree's connections through its allow list (docs/protocol.md §19.1).
	OnNetwork func(NetworkNotice)
	// OnUpdate receives the session/update notifications that no running
	// Prompt call claims: updates outside turns (requestId null, e.g. the
	// ones buffered during admission) and late updates of earlier turns.
	OnUpdate func(Update)
	// OnDecision receives session/permission audit notifications.
	OnDecision func(PermissionDecision)
	// OnJournal receives session/journal notifications: a session's
	// journal, record or ledger stopped being written (State "degraded")
	// or works again ("ok", with the Gap lost); updates keep flowing
	// meanwhile (docs/protocol.md §16).
	OnJournal func(JournalNotice)
	// OnRequest, when set, answers every sidecar → host request instead of
	// OnPermission, at the JSON-RPC level: it gets the request's id, method
	// and params verbatim and returns the result (marshalled as JSON) or an
	// error (an *Error is sent with its Code, Message and Data; any other
	// error as -32603). Each request runs on its own goroutine; ctx ends
	// when the connection closes, and OnRequest must then return; for
	// session/requestPermission it also ends when the sidecar settles the
	// ask without the host, as for OnPermission. It is
	// for hosts (and tests) that need methods or answers this package does
	// not model.
	OnRequest func(ctx context.Context, req Request) (any, error)
	// OnExtRequest answers the agents' `_…` extension requests
	// (session/extRequest, docs/protocol.md §23): its result is sent to
	// the agent verbatim; an *Error is sent with its Code, Message and
	// Data. When it is set, Initialize declares capabilities.extRequests
	// (without it the agents get -32601). ctx ends when the connection
	// closes or the sidecar sends $/cancelRequest for the request (the
	// agent withdrew it, its bound ran out, the turn or session ended:
	// docs/protocol.md §22); an answer after that is ignored. OnRequest,
	// when set, takes these requests instead.
	OnExtRequest func(ctx context.Context, req ExtRequest) (json.RawMessage, error)
	// OnExtNotification receives the agents' `_…` notifications
	// (session/extNotification), in wire order with the other callbacks.
	OnExtNotification func(ExtNotification)
	// OnFrame, when set, taps the connection: it is called with every
	// frame this Client writes (before the bytes are written, under the
	// write lock, so in wire order) and every line it reads from the
	// sidecar's stdout (on the read loop, before the frame is handled).
	// It must not block or call the Client. Frame.Data is its own copy.
	OnFrame func(Frame)
	// Stderr receives the sidecar's JSON log lines; nil discards them.
	// The Client copies them in from a goroutine until the sidecar exits,
	// so Stderr must stay writable until then (close a file given here
	// after Shutdown or Close returns, never after Start). Either way the
	// Client keeps their last 4 KiB (Client.StderrTail), which Start puts
	// into its error when the sidecar exits before initialize is
	// answered. Write errors of Stderr are ignored.
	Stderr io.Writer
}
