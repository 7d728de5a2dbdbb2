package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"
)

// Schema is the value of a record's "schema" key, shared with the npm acpx
// runtime's file store (docs/architecture.md, Durability).
const Schema = "acpx.session.v1"

// TimeLayout is the on-disk timestamp format: RFC 3339, UTC, millisecond
// precision, "Z" suffix — what JavaScript's Date.prototype.toISOString
// writes (fixture acpx-0.19.1-record.json).
const TimeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime renders t in TimeLayout (converted to UTC, truncated to ms):
// the one formatter of the record file's and the ownership ledger's times
// (the wire's are protocol.FormatTime).
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// NowStamp is the current time as a record stamps it (FormatTime).
func NowStamp() string { return FormatTime(time.Now()) }

// Not protocol.Usage (same fields): the on-disk keys are acpx's snake_case, the wire's camelCase.

// TokenUsage is a token count record (cumulative, or per request id). Counts
// are tokens, never negative (acpx rejects the whole record otherwise). The
// cache keys use the npm acpx runtime's names (cache_read_input_tokens,
// cache_creation_input_tokens): with other names acpx would drop them.
type TokenUsage struct {
	// InputTokens is the input token count.
	InputTokens int64 `json:"input_tokens"`
	// OutputTokens is the output token count.
	OutputTokens int64 `json:"output_tokens"`
	// TotalTokens is the total token count the agent reported.
	TotalTokens int64 `json:"total_tokens"`
	// CachedReadTokens are input tokens read from the model's cache (nil:
	// not reported; the sidecar never adds them into a cumulative usage).
	CachedReadTokens *int64 `json:"cache_read_input_tokens,omitempty"`
	// CachedWriteTokens are input tokens written to the model's cache
	// (nil: not reported; not summed either).
	CachedWriteTokens *int64 `json:"cache_creation_input_tokens,omitempty"`
	// ThoughtTokens are the model's reasoning tokens (nil: not reported;
	// not summed either).
	ThoughtTokens *int64 `json:"thought_tokens,omitempty"`
}

// Not protocol.Cost: the record has no basis (the wire's "turn" or "session-cumulative").

// Cost is an amount of money: Amount ≥ 0 and finite, Currency an ISO code
// such as "USD" (docs/rules.md#r30).
type Cost struct {
	// Amount is in units of Currency (not minor units).
	Amount float64 `json:"amount"`
	// Currency is the ISO 4217 code the agent reported.
	Currency string `json:"currency"`
}

// AcpxState is the record's "acpx" object (snake_case keys). The fields the
// npm acpx runtime knows are current_model_id, available_models,
// available_model_names, model_control, current_mode_id (and others, kept in
// Extra). AvailableModes, AgentProfile, AgentSessionID, CumulativeCost and
// RequestCost are ours: acpx reads records carrying them, but a record that
// acpx itself rewrites loses them (its parser keeps only its own acpx keys).
// Extra holds unknown keys verbatim across Load/Save; this can include acpx's
// own "session_options" (which acpx may use for its launch env) — the sidecar
// never adds launch env there (docs/rules.md#r3).
type AcpxState struct {
	// CurrentModelID is the model the agent last reported ("": none).
	CurrentModelID string `json:"current_model_id,omitempty"`
	// AvailableModels are the model ids the agent last offered.
	AvailableModels []string `json:"available_models,omitempty"`
	// AvailableModelNames maps model id to display name: acpx's, kept as
	// loaded; the sidecar never sets it.
	AvailableModelNames map[string]string `json:"available_model_names,omitempty"`
	// ModelControl is "config_option" or "legacy_set_model" (acpx values;
	// docs/rules.md#r24).
	ModelControl string `json:"model_control,omitempty"`
	// CurrentModeID is the mode the agent last reported ("": none).
	CurrentModeID string `json:"current_mode_id,omitempty"`
	// AvailableModes are the mode ids the agent last offered.
	AvailableModes []string `json:"available_modes,omitempty"`
	// AgentProfile is our profile name (codex, generic, …).
	AgentProfile string `json:"agent_profile,omitempty"`
	// PinnedModelID and PinnedModeID are the model and mode the host asked
	// for (session/open model/mode, session/setModel, session/setMode):
	// only these are re-applied and verified on resume. CurrentModelID and
	// CurrentModeID merely remember what the agent last reported.
	PinnedModelID string `json:"pinned_model_id,omitempty"`
	// PinnedModeID is the pinned mode ("": none pinned).
	PinnedModeID string `json:"pinned_mode_id,omitempty"`
	// AgentSessionID duplicates Record.AgentSessionID for our own use; acpx
	// reads only the top-level key. Prefer Record.AgentSessionID.
	AgentSessionID string `json:"agent_session_id,omitempty"`
	// CumulativeCost is the session's cost so far; RequestCost the cost per
	// request id (docs/rules.md#r30). acpx keeps only Record.CumulativeCost.
	CumulativeCost *Cost `json:"cumulative_cost,omitempty"`
	// RequestCost maps a request id to its turn's cost; a turn without a
	// reported cost has no entry.
	RequestCost map[string]Cost `json:"request_cost,omitempty"`
	// ContextUsage is the agent's last ACP usage_update used/size (ours;
	// docs/protocol.md §8 session/status usage.context).
	ContextUsage *ContextUsage `json:"context_usage,omitempty"`
	// Extra holds the object's other keys, verbatim (request_ids among
	// them).
	Extra map[string]json.RawMessage `json:"-"`

	shape keyShape
}

func (a AcpxState) isEmpty() bool {
	return a.CurrentModelID == "" && len(a.AvailableModels) == 0 && len(a.AvailableModelNames) == 0 &&
		a.ModelControl == "" && a.CurrentModeID == "" && len(a.AvailableModes) == 0 &&
		a.AgentProfile == "" && a.PinnedModelID == "" && a.PinnedModeID == "" && a.AgentSessionID == "" && a.CumulativeCost == nil &&
		len(a.RequestCost) == 0 && a.ContextUsage == nil && len(a.Extra) == 0
}

// ContextUsage is a context-window use in tokens: Used of Size, both ≥ 0
// (ACP usage_update used/size).
type ContextUsage struct {
	// Used is the tokens of the context window in use.
	Used int64 `json:"used"`
	// Size is the context window's size in tokens.
	Size int64 `json:"size"`
}

// MarshalJSON writes the known keys in declaration order, then Extra (sorted).
// An empty optional key is omitted unless it was present when loaded (a key
// loaded as null is written as null again).
func (a AcpxState) MarshalJSON() ([]byte, error) {
	return encodeObject(reflect.ValueOf(a), a.shape, a.Extra)
}

// UnmarshalJSON decodes the "acpx" object; unknown keys go to Extra.
func (a *AcpxState) UnmarshalJSON(data []byte) error {
	*a = AcpxState{}
	return decodeObject(data, reflect.ValueOf(a).Elem(), &a.shape, &a.Extra)
}

// Record is one session record, `<stateDir>/sessions/<EncodeKey(key)>.json`,
// in the on-disk shape of the npm acpx@0.19.1 file store (snake_case keys;
// docs/architecture.md, Durability).
// Timestamps are TimeLayout strings. Unknown top-level keys (e.g. acpx's
// last_agent_exit_code, imported_from) are kept in Extra and written back;
// keys loaded as null stay null; an Extra key equal to a field's key is
// ignored on write (the field wins). There is deliberately no env field: launch
// env is never persisted (docs/rules.md#r3).
//
// Compare Records with go-cmp using cmpopts.IgnoreUnexported(Record{},
// AcpxState{}); the unexported part only remembers the loaded key shape.
type Record struct {
	// Schema is the record's format, always Schema (Save sets it when
	// empty; Load refuses another).
	Schema string `json:"schema"`
	// SessionKey is the session key: on disk acpx_record_id (and the
	// record's file name, EncodeKey of it); on the wire the open's
	// sessionKey and identity.acpxRecordId (protocol.Identity.SessionKey).
	SessionKey string `json:"acpx_record_id"`
	// BackendSessionID is the ACP sessionId of the session (on the wire
	// identity.backendSessionId, protocol.Identity.BackendSessionID).
	BackendSessionID string `json:"acp_session_id"`
	// AgentSessionID is the agent's own session id where it differs from
	// BackendSessionID (acpx top-level key; docs/protocol.md §8 session/open
	// `identity`).
	AgentSessionID string `json:"agent_session_id,omitempty"`
	// AgentCommand is the open's command as one string: its path and
	// args joined by spaces (for people; AgentArgv is exact).
	AgentCommand string `json:"agent_command"`
	// AgentArgv is the open's command as argv: its path, then its args.
	AgentArgv []string `json:"agent_argv,omitempty"`
	// Cwd is the open's working directory; an open resumes the record
	// only with the same cwd.
	Cwd string `json:"cwd"`
	// Name is acpx's session name (the runtime session name acpx reads
	// back from a record); a record the sidecar makes holds its SessionKey
	// here too. The sidecar never reads it.
	Name string `json:"name,omitempty"`
	// CreatedAt is when the record was first written (Save sets it when
	// empty).
	CreatedAt string `json:"created_at"`
	// LastUsedAt is when a session last wrote its state into the record
	// (Save sets it to CreatedAt when empty).
	LastUsedAt string `json:"last_used_at"`
	// LastSeq is the seq of the last session/update of the session that
	// last wrote the record (0: none).
	LastSeq int64 `json:"last_seq"`
	// LastRequestID is the requestId of the last turn started, written
	// when it starts (nil before the first turn).
	LastRequestID *string `json:"last_request_id,omitempty"`
	// EventLog is acpx's event_log object, kept verbatim; we write none.
	EventLog json.RawMessage `json:"event_log,omitempty"`
	// Closed is true once the session was closed (session/close or the
	// recovery of a leftover); a closed record still resumes.
	Closed bool `json:"closed"`
	// ClosedAt is when it was closed (nil while not closed).
	ClosedAt *string `json:"closed_at,omitempty"`
	// Pid is the pid of the provider leader last admitted, > 0 (nil once
	// a retire ended its tree: a parked per-turn session).
	Pid *int `json:"pid,omitempty"`
	// AgentStartedAt is when that provider was started (nil with Pid).
	AgentStartedAt *string `json:"agent_started_at,omitempty"`
	// LastPromptAt is when the last turn ended (nil before the first).
	LastPromptAt *string `json:"last_prompt_at,omitempty"`
	// ProtocolVersion is the ACP protocol version of the agent's
	// initialize answer (0: unknown).
	ProtocolVersion int `json:"protocol_version,omitempty"`
	// AgentCapabilities are the agent's ACP agentCapabilities from its
	// initialize answer, verbatim.
	AgentCapabilities json.RawMessage `json:"agent_capabilities,omitempty"`
	// Title is always written (null when nil), as acpx does.
	Title *string `json:"title"`
	// Messages is the acpx conversation array; nil is written as []. Save
	// rejects messages the acpx runtime could not parse (ValidateMessages).
	Messages json.RawMessage `json:"messages"`
	// UpdatedAt is when the record was last written (Save sets it).
	UpdatedAt string `json:"updated_at"`
	// CumulativeTokenUsage is the key's token usage over all its turns,
	// resumed sessions' included (nil: none yet).
	CumulativeTokenUsage *TokenUsage `json:"cumulative_token_usage,omitempty"`
	// CumulativeCost is the last cumulative cost the agent reported (nil:
	// none ever).
	CumulativeCost *Cost `json:"cumulative_cost,omitempty"`
	// RequestTokenUsage maps a request id to its turn's usage; its keys
	// count as used request ids on resume.
	RequestTokenUsage map[string]TokenUsage `json:"request_token_usage,omitempty"`
	// Acpx is the record's "acpx" object.
	Acpx AcpxState `json:"acpx,omitempty"`
	// Extra holds unknown top-level keys, verbatim.
	Extra map[string]json.RawMessage `json:"-"`

	shape keyShape
}

// MarshalJSON writes the record compactly: known keys in acpx's order, then
// Extra (sorted). Nil Messages is written as [].
func (r Record) MarshalJSON() ([]byte, error) {
	if len(r.Messages) == 0 {
		r.Messages = json.RawMessage("[]")
	}
	return encodeObject(reflect.ValueOf(r), r.shape, r.Extra)
}

// UnmarshalJSON decodes a record object; unknown keys go to Extra. It does
// not check the schema (Store.Load does).
func (r *Record) UnmarshalJSON(data []byte) error {
	*r = Record{}
	return decodeObject(data, reflect.ValueOf(r).Elem(), &r.shape, &r.Extra)
}

// ErrInvalidRecord is wrapped by Validate (and so by Save/Update) when a
// record would not be readable by the npm acpx runtime or by Load.
var ErrInvalidRecord = errors.New("store: invalid record")

// Validate checks the rules under which acpx@0.19.1 accepts a record (it
// silently discards the whole record otherwise): schema, a valid key as
// acpx_record_id, last_seq ≥ 0, pid > 0 when set, non-negative token counts
// and costs, messages in acpx's conversation shape, and valid JSON in the raw
// fields. Errors wrap ErrInvalidRecord.
func (r *Record) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidRecord, fmt.Sprintf(format, a...))
	}
	if r.Schema != Schema {
		return bad("schema %q, want %q", r.Schema, Schema)
	}
	if err := ValidateKey(r.SessionKey); err != nil {
		return fmt.Errorf("%w: acpx_record_id: %w", ErrInvalidRecord, err)
	}
	if r.LastSeq < 0 {
		return bad("last_seq %d < 0", r.LastSeq)
	}
	if r.Pid != nil && *r.Pid <= 0 {
		return bad("pid %d <= 0", *r.Pid)
	}
	if r.ProtocolVersion < 0 {
		return bad("protocol_version %d < 0", r.ProtocolVersion)
	}
	if err := checkUsage("cumulative_token_usage", r.CumulativeTokenUsage); err != nil {
		return bad("%v", err)
	}
	for id, u := range r.RequestTokenUsage {
		if err := checkUsage("request_token_usage["+id+"]", &u); err != nil {
			return bad("%v", err)
		}
	}
	for name, c := range map[string]*Cost{"cumulative_cost": r.CumulativeCost, "acpx.cumulative_cost": r.Acpx.CumulativeCost} {
		if c != nil && !(c.Amount >= 0 && !math.IsInf(c.Amount, 0)) {
			return bad("%s amount %v", name, c.Amount)
		}
	}
	for id, c := range r.Acpx.RequestCost {
		if !(c.Amount >= 0 && !math.IsInf(c.Amount, 0)) {
			return bad("acpx.request_cost[%s] amount %v", id, c.Amount)
		}
	}
	if c := r.Acpx.ContextUsage; c != nil && (c.Used < 0 || c.Size < 0) {
		return bad("acpx.context_usage has a negative count")
	}
	for name, raw := range map[string]json.RawMessage{"event_log": r.EventLog, "agent_capabilities": r.AgentCapabilities} {
		if len(raw) > 0 && !json.Valid(raw) {
			return bad("%s is not valid JSON", name)
		}
	}
	if len(r.Messages) > 0 {
		if err := ValidateMessages(r.Messages); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
		}
	}
	return nil
}

func checkUsage(name string, u *TokenUsage) error {
	if u == nil {
		return nil
	}
	vals := []int64{u.InputTokens, u.OutputTokens, u.TotalTokens}
	for _, p := range []*int64{u.CachedReadTokens, u.CachedWriteTokens, u.ThoughtTokens} {
		if p != nil {
			vals = append(vals, *p)
		}
	}
	for _, v := range vals {
		if v < 0 {
			return fmt.Errorf("%s has a negative count", name)
		}
	}
	return nil
}

// encodeFile renders r as the file body: 2-space indented JSON plus a
// trailing newline, like acpx's JSON.stringify(value, null, 2) + "\n".
func encodeFile(r *Record) ([]byte, error) {
	compact, err := r.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
