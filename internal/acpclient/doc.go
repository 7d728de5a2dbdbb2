// Package acpclient is the ACP client side of one provider: the
// connection over the agent's stdio (Conn: NDJSON lines by internal/jsonl,
// sourcegraph/jsonrpc2, the ACP SDK's types), the fast path of
// session/update lines (Update, Slab), the bounded outbox to the agent's
// stdin (ErrAgentHung), the strict decoding of agent frames
// (DecodeStrict), the agent's requests handed to a session (PermissionAsk,
// AgentMsg and the id its $/cancel_request names, ExtEvent), the requests
// the sidecar builds for the agent (InitializeParams, SessionParams,
// PromptRequest) and the shapes of the handshake's results
// (InitializeResult, SessionState), the checks of the
// agent's capabilities before sending (AgentCaps) and the tail of its
// stderr (StderrTail). See docs/architecture.md, "ACP client side", and
// docs/protocol.md §20 ("Threat model"), §22 and §23.
//
// It knows nothing of sessions: it imports nothing of the session actor
// (internal/session), the Manager (internal/adapter), the host side
// (internal/rpc), the store (internal/store), the state store
// (internal/statestore) or the reaper (internal/reaper). It may import
// protocol (error types), internal/jsonl, internal/strictjson, the ACP SDK,
// jsonrpc2, zap and golang.org/x/sys.
package acpclient
