package modelstub

// The OpenAI Responses API (codex; Copilot and Kimi Code): `POST
// /v1/responses`, always answered as server-sent events (docs/agents.md):
// response.created, the item (output_item.added, text deltas or the
// function call's argument deltas and arguments.done, output_item.done)
// and response.completed, whose response carries the item again in
// `output` and the usage.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

func (s *Stub) serveResponses(w http.ResponseWriter, r *http.Request, n int) {
	rep, ok := s.turn(w, r, n, APIResponses, decideResponses)
	if !ok {
		return
	}
	s.writeSSE(w, n, responsesEvents(rep, n))
}

// inputItem is the part of a Responses-API `input` item the stub reads.
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// decideResponses picks the reply for a Responses request body (rules in
// the package doc); `input` is a string (one user message) or a list of
// items.
func decideResponses(body []byte) (reply, error) {
	var req struct {
		Input json.RawMessage `json:"input"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return reply{}, fmt.Errorf("body is not a JSON object: %w", err)
	}
	var items []inputItem
	if len(req.Input) > 0 && req.Input[0] == '"' {
		// `input` may be a bare string: one user message.
		var text string
		if err := json.Unmarshal(req.Input, &text); err != nil {
			return reply{}, fmt.Errorf("input: %w", err)
		}
		return decideText(text), nil
	}
	if len(req.Input) > 0 && !bytes.Equal(req.Input, []byte("null")) {
		if err := json.Unmarshal(req.Input, &items); err != nil {
			return reply{}, fmt.Errorf("input is not a list of items: %w", err)
		}
	}
	lastUser, lastOutput := -1, -1
	for i, it := range items {
		switch {
		case it.Type == "function_call_output":
			lastOutput = i
		case it.Role == "user" && (it.Type == "" || it.Type == "message"):
			lastUser = i
		}
	}
	if lastOutput > lastUser {
		return reply{kind: KindToolResult}, nil
	}
	if lastUser < 0 {
		return reply{kind: KindText}, nil
	}
	// The trailing user messages: Kimi Code sends a <system-reminder>
	// user message after the prompt.
	first := lastUser
	for first > 0 && items[first-1].Role == "user" && (items[first-1].Type == "" || items[first-1].Type == "message") {
		first--
	}
	texts := []string{}
	for _, it := range items[first : lastUser+1] {
		texts = append(texts, contentText(it.Content))
	}
	text := latestRun(texts)
	declared := []string{}
	for _, t := range req.Tools {
		if q, ok := askLine(text); ok && t.Name == ResponsesAskToolName {
			return reply{kind: KindAskUser, cmd: q}, nil // askuser.go
		}
		declared = append(declared, t.Name)
	}
	rep := decideText(text)
	if rep.kind == KindFunctionCall {
		// codex's exec_command unless the request declares another known
		// shell tool only (Copilot's bash, Kimi's Bash).
		if tool := pickTool(responsesShellTools, declared); tool != "" && tool != ToolName {
			rep.tool = tool
		}
	}
	return rep, nil
}

// responsesEvents builds the stream for a reply; n numbers the ids
// (resp_n, msg_n, fc_n, call_n) so they are unique per stub and
// deterministic.
func responsesEvents(rep reply, n int) []sseEvent {
	respID := fmt.Sprintf("resp_%d", n)
	var out []sseEvent
	add := func(typ string, v map[string]any) {
		v["type"] = typ
		out = append(out, sseEvent{typ: typ, data: mustJSON(v)})
	}
	add("response.created", map[string]any{"response": map[string]any{"id": respID}})

	var output []any // the items, again in response.completed (Copilot reads them there)
	switch rep.kind {
	case KindFunctionCall, KindAskUser:
		name, args := ToolName, mustJSON(map[string]string{
			"cmd":                 rep.cmd,
			"sandbox_permissions": "require_escalated",
			"justification":       Justification,
		})
		switch {
		case rep.kind == KindAskUser:
			name, args = ResponsesAskToolName, mustJSON(askInputCodex(rep.cmd))
		case rep.tool != "":
			name, args = rep.tool, mustJSON(commandArgs(rep.cmd))
		}
		itemID := fmt.Sprintf("fc_%d", n)
		item := func(arguments string, status string) map[string]any {
			return map[string]any{
				"type":      "function_call",
				"id":        itemID,
				"call_id":   fmt.Sprintf("call_%d", n),
				"name":      name,
				"arguments": arguments,
				"status":    status,
			}
		}
		add("response.output_item.added", map[string]any{"output_index": 0, "item": item("", "in_progress")})
		// The arguments streamed in two pieces that add up to the final
		// arguments (Kimi Code checks they do, and retries otherwise).
		half := len(args) / 2
		for _, piece := range []string{string(args[:half]), string(args[half:])} {
			add("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": 0, "delta": piece})
		}
		add("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": 0, "arguments": string(args)})
		done := item(string(args), "completed")
		add("response.output_item.done", map[string]any{"output_index": 0, "item": done})
		output = append(output, done)
	default:
		deltas := rep.deltas()
		msgID := fmt.Sprintf("msg_%d", n)
		add("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
			"type": "message", "id": msgID, "role": "assistant", "status": "in_progress", "content": []any{},
		}})
		for _, d := range deltas {
			add("response.output_text.delta", map[string]any{
				"item_id": msgID, "output_index": 0, "content_index": 0, "delta": d,
			})
		}
		done := map[string]any{
			"type": "message", "id": msgID, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": strings.Join(deltas, ""), "annotations": []any{}}},
		}
		add("response.output_item.done", map[string]any{"output_index": 0, "item": done})
		output = append(output, done)
	}
	add("response.completed", map[string]any{"response": map[string]any{
		"id": respID, "object": "response", "status": "completed", "output": output,
		"usage": map[string]any{
			"input_tokens": UsageInput, "output_tokens": UsageOutput, "total_tokens": UsageTotal,
		},
	}})
	return out
}
