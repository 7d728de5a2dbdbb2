package policy

import (
	"encoding/json"
	"strconv"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/strictjson"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Ask is an ACP session/request_permission's params as the policy reads
// them: ToolCall and Options are the agent's, cleaned for the host
// (jsonl.CleanRaw); Head and Opts are what the policy judges by.
type Ask struct {
	// ToolCall is params.toolCall, a JSON object cleaned for the host.
	ToolCall json.RawMessage
	// Options is params.options, a JSON array cleaned for the host.
	Options json.RawMessage
	// Head is what the policy reads of ToolCall (ToolCallID is set even
	// for a malformed ask, for the audit).
	Head ToolCallHead
	// Opts are Options decoded, in the agent's order.
	Opts []Option
}

// Member names the policy reads: a key differing from one of them only by
// case makes an ask malformed (strictjson.DecodeObject).
var (
	askKeys      = []string{"toolCall", "options"}
	toolCallKeys = []string{"toolCallId", "kind", "title", "rawInput"}
	rawInputKeys = []string{"command", "cmd"}
	optionKeys   = []string{"optionId", "kind"}
)

// ParseAsk decodes ACP session/request_permission params strictly
// (internal/strictjson): case-sensitive keys, no member twice, toolCall an
// object whose toolCallId, kind and title are strings when present and
// whose rawInput (when an object) has no command/cmd twice, options an
// array of objects each with a string optionId — none twice — and a
// string kind. why is "" for a well-formed ask, else what makes it
// malformed (docs/protocol.md §20); Head.ToolCallID is set for a
// malformed ask too when it could be read (for the audit). A kind outside
// ACP's ToolKinds is judged as missing (inferred from the title, Kind).
func ParseAsk(params json.RawMessage) (pa Ask, why string) {
	p, why := strictjson.DecodeObject(params, askKeys...)
	if why != "" {
		return pa, "params: " + why
	}
	tc, ok := p["toolCall"]
	if !ok {
		return pa, "no toolCall"
	}
	if id, ok := jsonl.TopString(tc, "toolCallId"); ok {
		pa.Head.ToolCallID = string(id) // for the audit of a malformed ask too
	}
	head, why := strictjson.DecodeObject(tc, toolCallKeys...)
	if why != "" {
		return pa, "toolCall: " + why
	}
	for _, k := range []string{"toolCallId", "kind", "title"} {
		v, _, ok := head.Str(k)
		if !ok {
			return pa, "toolCall." + k + " is not a string"
		}
		switch k {
		case "toolCallId":
			pa.Head.ToolCallID = v
		case "kind":
			pa.Head.Kind = v
		default:
			pa.Head.Title = v
		}
	}
	if ri, ok := head["rawInput"]; ok && len(ri) > 0 && ri[0] == '{' {
		in, why := strictjson.DecodeObject(ri, rawInputKeys...)
		if why != "" {
			return pa, "toolCall.rawInput: " + why
		}
		pa.Head.RawInput = map[string]json.RawMessage(in)
	}
	rawOpts, ok := p["options"]
	if !ok || len(rawOpts) == 0 || rawOpts[0] != '[' {
		return pa, "options is not an array"
	}
	var elems []json.RawMessage
	if json.Unmarshal(rawOpts, &elems) != nil {
		return pa, "options is not an array"
	}
	seen := map[string]bool{}
	for i, el := range elems {
		o, why := strictjson.DecodeObject(el, optionKeys...)
		if why != "" {
			return pa, "options[" + strconv.Itoa(i) + "]: " + why
		}
		id, present, ok := o.Str("optionId")
		if !ok || !present {
			return pa, "options[" + strconv.Itoa(i) + "].optionId is not a string"
		}
		kind, _, ok := o.Str("kind")
		if !ok {
			return pa, "options[" + strconv.Itoa(i) + "].kind is not a string"
		}
		if seen[id] {
			return pa, "optionId " + protocol.QuoteShort(id) + " occurs twice"
		}
		seen[id] = true
		pa.Opts = append(pa.Opts, Option{OptionID: id, Kind: kind})
	}
	pa.ToolCall, pa.Options = jsonl.CleanRaw(tc), jsonl.CleanRaw(rawOpts)
	return pa, ""
}
