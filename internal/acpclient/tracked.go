package acpclient

import "encoding/json"

// Tracked is what the actor keeps from one ACP SessionUpdate of a kind
// other than KindOther (internal/session's Actor.trackUpdate): the
// members of tool_call, tool_call_update, current_mode_update,
// config_option_update and usage_update it reads. A member the update
// does not carry is its zero value (nil for the pointers). Its fields
// only look like protocol's and the record's structs: this is the agent's
// side of the wire.
type Tracked struct {
	// ToolCallID is ACP toolCallId (tool_call, tool_call_update).
	ToolCallID string `json:"toolCallId"`
	// ToolKind is ACP kind, the call's ToolKind ("" when not given).
	ToolKind string `json:"kind"`
	// Status is ACP status of a tool_call_update ("completed", "failed"…).
	Status string `json:"status"`
	// CurrentModeID is ACP currentModeId (current_mode_update).
	CurrentModeID string `json:"currentModeId"`
	// ConfigOptions are ACP configOptions, raw (config_option_update);
	// nil when absent.
	ConfigOptions []json.RawMessage `json:"configOptions"`
	// Used is ACP usage_update's context use, in tokens; nil when absent.
	Used *int64 `json:"used"`
	// Size is ACP usage_update's context window, in tokens; nil when
	// absent.
	Size *int64 `json:"size"`
	// Cost is ACP usage_update's cumulative session cost; nil when absent.
	Cost *Cost `json:"cost"`
}

// Cost is ACP's cost object: Amount in units of Currency (not minor
// units), Currency an ISO 4217 code. Not usage.ReportedCost or
// store.Cost (same fields): this package imports nothing of the
// session's accounting or the store; the session converts it.
type Cost struct {
	// Amount is ACP cost.amount.
	Amount float64 `json:"amount"`
	// Currency is ACP cost.currency.
	Currency string `json:"currency"`
}

// DecodeTracked decodes the members the actor keeps from update (the raw
// ACP SessionUpdate object); false when it is not an object of them.
// Updates of KindOther are never decoded (the bulk of a turn: chunks,
// plans).
func DecodeTracked(update json.RawMessage) (Tracked, bool) {
	var u Tracked
	if json.Unmarshal(update, &u) != nil {
		return Tracked{}, false
	}
	return u, true
}
