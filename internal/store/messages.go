package store

import (
	"encoding/json"
	"fmt"
)

// ValidateMessages checks that raw is a JSON array of conversation messages
// in the shape the npm acpx@0.19.1 runtime accepts; acpx discards the whole
// record if any message fails. Accepted messages (Zed thread format):
//
//	"Resume"
//	{"User":  {"id": string, "content": [UserContent…]}}
//	{"Agent": {"content": [AgentContent…], "tool_results": {id: ToolResult}}}
//
// UserContent is {"Text": string} | {"Mention": {"uri","content": string}} |
// {"Image": Image} | {"Audio": {"source","mime_type": string}}; AgentContent
// is {"Text": string} | {"Thinking": {"text": string, "signature"?: string|null}}
// | {"RedactedThinking": string} | {"ToolUse": {"id","name","raw_input": string,
// "input": any, "is_input_complete": bool, "thought_signature"?: string|null}};
// ToolResult is {"tool_use_id","tool_name": string, "is_error": bool,
// "content": {"Text": string} | {"Image": Image}}; Image is {"source": string,
// "size"?: null | {"width","height": number}}. The error names the index of
// the first bad message.
func ValidateMessages(raw json.RawMessage) error {
	var msgs []any
	if err := json.Unmarshal(raw, &msgs); err != nil || msgs == nil {
		return fmt.Errorf("messages: not a JSON array")
	}
	for i, m := range msgs {
		if !isConversationMessage(m) {
			return fmt.Errorf("messages[%d]: not an acpx conversation message", i)
		}
	}
	return nil
}

func obj(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	return m, ok
}

func isString(v any) bool { _, ok := v.(string); return ok }

func isNumber(v any) bool { _, ok := v.(float64); return ok }

func isBool(v any) bool { _, ok := v.(bool); return ok }

// optString: absent, null, or a string.
func optString(m map[string]any, k string) bool {
	v, ok := m[k]
	return !ok || v == nil || isString(v)
}

func hasStrings(m map[string]any, keys ...string) bool {
	for _, k := range keys {
		if !isString(m[k]) {
			return false
		}
	}
	return true
}

func isConversationMessage(v any) bool {
	if s, ok := v.(string); ok {
		return s == "Resume"
	}
	m, ok := obj(v)
	if !ok {
		return false
	}
	if u, has := m["User"]; has && isUserMessage(u) {
		return true
	}
	if a, has := m["Agent"]; has && isAgentMessage(a) {
		return true
	}
	return false
}

func isUserMessage(v any) bool {
	u, ok := obj(v)
	if !ok || !isString(u["id"]) {
		return false
	}
	content, ok := u["content"].([]any)
	if !ok {
		return false
	}
	for _, c := range content {
		if !isUserContent(c) {
			return false
		}
	}
	return true
}

func isUserContent(v any) bool {
	m, ok := obj(v)
	if !ok {
		return false
	}
	if isString(m["Text"]) {
		return true
	}
	if x, has := m["Mention"]; has {
		mm, ok := obj(x)
		return ok && hasStrings(mm, "uri", "content")
	}
	if x, has := m["Image"]; has {
		return isImage(x)
	}
	if x, has := m["Audio"]; has {
		a, ok := obj(x)
		return ok && hasStrings(a, "source", "mime_type")
	}
	return false
}

func isImage(v any) bool {
	m, ok := obj(v)
	if !ok || !isString(m["source"]) {
		return false
	}
	size, has := m["size"]
	if !has || size == nil {
		return true
	}
	s, ok := obj(size)
	return ok && isNumber(s["width"]) && isNumber(s["height"])
}

func isAgentMessage(v any) bool {
	a, ok := obj(v)
	if !ok {
		return false
	}
	content, ok := a["content"].([]any)
	if !ok {
		return false
	}
	for _, c := range content {
		if !isAgentContent(c) {
			return false
		}
	}
	results, ok := obj(a["tool_results"])
	if !ok {
		return false
	}
	for _, r := range results {
		if !isToolResult(r) {
			return false
		}
	}
	return true
}

func isAgentContent(v any) bool {
	m, ok := obj(v)
	if !ok {
		return false
	}
	if isString(m["Text"]) {
		return true
	}
	if x, has := m["Thinking"]; has {
		t, ok := obj(x)
		return ok && isString(t["text"]) && optString(t, "signature")
	}
	if isString(m["RedactedThinking"]) {
		return true
	}
	if x, has := m["ToolUse"]; has {
		t, ok := obj(x)
		if !ok || !hasStrings(t, "id", "name", "raw_input") {
			return false
		}
		_, hasInput := t["input"]
		return hasInput && isBool(t["is_input_complete"]) && optString(t, "thought_signature")
	}
	return false
}

func isToolResult(v any) bool {
	m, ok := obj(v)
	if !ok || !hasStrings(m, "tool_use_id", "tool_name") || !isBool(m["is_error"]) {
		return false
	}
	c, ok := obj(m["content"])
	if !ok {
		return false
	}
	if isString(c["Text"]) {
		return true
	}
	if x, has := c["Image"]; has {
		return isImage(x)
	}
	return false
}
