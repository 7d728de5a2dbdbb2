package session

import (
	acp "github.com/coder/acp-go-sdk"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
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

// accounting is the session's usage and cost (docs/protocol.md §12):
// cumulative, per request id, and the agent's last context-window report.
// Actor-owned; turns add to it (turn.go).
type accounting struct {
	usage        protocol.Usage
	perRequest   map[string]protocol.Usage
	cost         *protocol.Cost
	contextUsage *protocol.ContextUsage
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

// addTurn adds a finished turn's usage: kept per request id, and its
// input, output and total tokens added to the cumulative usage.
func (a *accounting) addTurn(requestID string, u protocol.Usage) {
	a.perRequest[requestID] = u
	a.usage.InputTokens += u.InputTokens
	a.usage.OutputTokens += u.OutputTokens
	a.usage.TotalTokens += u.TotalTokens
}

// restore loads usage, cost and context usage from a resumed record.
func (a *accounting) restore(r *store.Record) {
	if u := r.CumulativeTokenUsage; u != nil {
		a.usage = usageFromRecord(*u)
	}
	for id, u := range r.RequestTokenUsage {
		a.perRequest[id] = usageFromRecord(u)
	}
	if c := r.CumulativeCost; c != nil {
		a.cost = &protocol.Cost{Amount: c.Amount, Currency: c.Currency, Basis: protocol.CostSessionCumulative}
	}
	if c := r.Acpx.ContextUsage; c != nil {
		a.contextUsage = &protocol.ContextUsage{Used: c.Used, Size: c.Size}
	}
}

// toRecord writes usage, cost and context usage into r (restore reads
// them back).
func (a *accounting) toRecord(r *store.Record) {
	cu := usageToRecord(a.usage)
	r.CumulativeTokenUsage = &cu
	if r.RequestTokenUsage == nil {
		r.RequestTokenUsage = map[string]store.TokenUsage{}
	}
	for id, u := range a.perRequest {
		r.RequestTokenUsage[id] = usageToRecord(u)
	}
	if a.cost != nil {
		r.CumulativeCost = &store.Cost{Amount: a.cost.Amount, Currency: a.cost.Currency}
	}
	if c := a.contextUsage; c != nil {
		r.Acpx.ContextUsage = &store.ContextUsage{Used: c.Used, Size: c.Size}
	}
}

// status is session/status `usage`, a copy (it may outlive this turn of
// the actor loop).
func (a *accounting) status() protocol.UsageStatus {
	us := protocol.UsageStatus{Cumulative: a.usage, PerRequest: make(map[string]protocol.Usage, len(a.perRequest)), Context: a.contextUsage}
	for id, u := range a.perRequest {
		us.PerRequest[id] = u
	}
	return us
}

// usageFromRecord converts the record's snake_case usage.
func usageFromRecord(u store.TokenUsage) protocol.Usage {
	return protocol.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
		CachedReadTokens: u.CachedReadTokens, CachedWriteTokens: u.CachedWriteTokens, ThoughtTokens: u.ThoughtTokens}
}

// usageToRecord converts usage for the record.
func usageToRecord(u protocol.Usage) store.TokenUsage {
	return store.TokenUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
		CachedReadTokens: u.CachedReadTokens, CachedWriteTokens: u.CachedWriteTokens, ThoughtTokens: u.ThoughtTokens}
}
