package session

import (
	acp "github.com/coder/acp-go-sdk"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// turnState is the session's turn and what arrives around it: the turn in
// flight, the queue behind it (queue.go), the request ids already used,
// the updates held while admission or a session/load runs, and the agent
// requests the host may still be asked to answer. Actor-owned.
type turnState struct {
	turn      *turn
	queue     []*queuedTurn // true prompts waiting behind turn, in arrival order (queue.go)
	lastReqID *string
	usedIDs   map[string]bool
	toolTurns map[string]string // toolCallId -> requestId of the turn it started in
	// toolKinds: toolCallId -> the ToolKind the agent last reported for
	// it in a tool_call or tool_call_update (a permission request may omit
	// it: kimi-code 2.1.0; docs/agents.md).
	toolKinds map[string]string
	// lostInTurn: the connection died during a turn.
	lostInTurn  bool
	replaying   bool                 // session/load replay: journaled as history, not live
	replayDrop  bool                 // a revive's replay: dropped (it was journaled live)
	buffered    []acpclient.Update   // updates that arrived during a new-session admission
	extBuffered []protocol.ExtNotice // extension notifications that arrived during admission (ext.go)
	// withdrawable: what withdraws each host-bound request by the
	// agent's request id, for its $/cancel_request (agentcalls.go).
	withdrawable map[string]func()
}

// maxToolTurns bounds the tool-call → turn map of a session (entries leave
// it when the call completes or fails; a session whose agent never says so
// starts the map afresh past this many).
const maxToolTurns = 1024

// toolCallStarted notes that tool call id started in the running turn (a
// `tool_call` update); without a turn or an id it notes nothing.
func (t *turnState) toolCallStarted(id string) {
	if t.turn == nil || id == "" {
		return
	}
	if len(t.toolTurns) >= maxToolTurns {
		t.toolTurns = map[string]string{} // bounded: forget old calls
	}
	t.toolTurns[id] = t.turn.requestID
}

// noteToolKind remembers the ToolKind the agent reported for call id
// (bounded like toolTurns); kinds outside ACP's are ignored.
func (t *turnState) noteToolKind(id, kind string) {
	if id == "" || !protocol.ToolKinds[kind] {
		return
	}
	if t.toolKinds == nil || len(t.toolKinds) >= maxToolTurns {
		t.toolKinds = map[string]string{}
	}
	t.toolKinds[id] = kind
}

// toolCallUpdated attributes a `tool_call_update` of call id: the request
// id of the earlier turn the call started in, or nil when it is the
// running turn's own call (or unknown). A completed or failed call is
// forgotten.
func (t *turnState) toolCallUpdated(id, status string) *string {
	rid, known := t.toolTurns[id]
	if status == string(acp.ToolCallStatusCompleted) || status == string(acp.ToolCallStatusFailed) {
		delete(t.toolTurns, id)
	}
	if known && (t.turn == nil || t.turn.requestID != rid) {
		return &rid
	}
	return nil
}
