package modelstub

// The Anthropic Messages API (Claude Code): `POST /v1/messages` (Claude
// Code adds `?beta=true`; the query is ignored), answered as server-sent
// events `event: <type>` + `data: <json with the same "type">`:
//
//	message_start {message:{id:"msg_N", type:"message", role:"assistant",
//	               model:<request model>, content:[], stop_reason:null,
//	               stop_sequence:null, usage:{input_tokens:10, output_tokens:0, ...}}}
//	content_block_start {index:0, content_block:{type:"text", text:""}}
//	content_block_delta {index:0, delta:{type:"text_delta", text:<delta>}}  (one per delta)
//	  or, for a tool call,
//	content_block_start {index:0, content_block:{type:"tool_use", id:"toolu_N",
//	                     name:"Bash", input:{}}}
//	content_block_delta {index:0, delta:{type:"input_json_delta",
//	                     partial_json:<JSON of {"command","description"}>}}
//	content_block_stop {index:0}
//	message_delta {delta:{stop_reason:"end_turn"|"tool_use", stop_sequence:null},
//	               usage:{output_tokens:5}}
//	message_stop {}
//
// A request without "stream":true (the API's default is false) gets the
// finished Message as one JSON body instead. `POST /v1/messages/count_tokens` answers
// {"input_tokens":10}.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// anthropicMessage is the part of a Messages-API message the stub reads;
// Content is a string or a list of blocks.
type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is the part of a content block the stub reads.
type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// anthropicRequest is the part of a Messages-API request the stub reads.
type anthropicRequest struct {
	Model    string             `json:"model"`
	Stream   bool               `json:"stream"`
	Messages []anthropicMessage `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

func (s *Stub) serveAnthropic(w http.ResponseWriter, r *http.Request, n int) {
	var req anthropicRequest
	rep, ok := s.turn(w, r, n, APIAnthropic, func(body []byte) (reply, error) {
		if err := json.Unmarshal(body, &req); err != nil {
			return reply{}, fmt.Errorf("body is not a Messages request: %w", err)
		}
		return decideAnthropic(req)
	})
	if !ok {
		return
	}
	if !req.Stream {
		s.writeJSON(w, n, anthropicMessageJSON(rep, n, req.Model))
		return
	}
	s.writeSSE(w, n, anthropicEvents(rep, n, req.Model))
}

// decideAnthropic applies the package rules: a tool_result block in the
// last message (a user message) is rule 1; rule 2 reads the text blocks
// (or string content) of the last user message, and needs a tool named
// AnthropicToolName in the request's tools.
func decideAnthropic(req anthropicRequest) (reply, error) {
	if len(req.Messages) == 0 {
		return reply{kind: KindText}, nil
	}
	lastUser := -1
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			lastUser = i
			break
		}
	}
	if lastUser < 0 {
		return reply{kind: KindText}, nil
	}
	text, hasResult, err := anthropicContent(req.Messages[lastUser].Content)
	if err != nil {
		return reply{}, err
	}
	if hasResult && lastUser == len(req.Messages)-1 {
		return reply{kind: KindToolResult}, nil
	}
	allowed, ask := false, false
	for _, t := range req.Tools {
		allowed = allowed || t.Name == AnthropicToolName
		ask = ask || t.Name == AnthropicAskToolName
	}
	if q, ok := askLine(text); ok && ask {
		return reply{kind: KindAskUser, cmd: q}, nil // askuser.go
	}
	return decideText(text).textOnly(allowed), nil
}

// anthropicContent returns the text of a message's content (a string, or
// its "text" blocks joined by newlines) and whether it holds a
// "tool_result" block. Content that is neither a string nor a list of
// objects is an error.
func anthropicContent(raw json.RawMessage) (text string, hasResult bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	if raw[0] == '"' {
		err = json.Unmarshal(raw, &text)
		return text, false, err
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", false, fmt.Errorf("message content: %w", err)
	}
	var texts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "tool_result":
			hasResult = true
		}
	}
	return strings.Join(texts, "\n"), hasResult, nil
}

// anthropicStop is the stop_reason of a reply.
func anthropicStop(rep reply) string {
	if rep.kind == KindFunctionCall || rep.kind == KindAskUser {
		return "tool_use"
	}
	return "end_turn"
}

// anthropicEvents builds the stream for a reply; n numbers the ids (msg_n,
// toolu_n).
func anthropicEvents(rep reply, n int, model string) []sseEvent {
	var out []sseEvent
	add := func(typ string, v map[string]any) {
		v["type"] = typ
		out = append(out, sseEvent{typ: typ, data: mustJSON(v)})
	}
	add("message_start", map[string]any{"message": map[string]any{
		"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": UsageInput, "output_tokens": 0,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	if rep.kind == KindFunctionCall || rep.kind == KindAskUser {
		name, input := anthropicTool(rep)
		add("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{
			"type": "tool_use", "id": fmt.Sprintf("toolu_%d", n), "name": name, "input": map[string]any{},
		}})
		add("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{
			"type": "input_json_delta", "partial_json": string(mustJSON(input)),
		}})
	} else {
		add("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, d := range rep.deltas() {
			add("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": d}})
		}
	}
	add("content_block_stop", map[string]any{"index": 0})
	add("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": anthropicStop(rep), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": UsageOutput},
	})
	add("message_stop", map[string]any{})
	return out
}

// anthropicMessageJSON is the finished Message of a reply, for requests
// without "stream":true.
func anthropicMessageJSON(rep reply, n int, model string) map[string]any {
	block := map[string]any{"type": "text", "text": strings.Join(rep.deltas(), "")}
	if rep.kind == KindFunctionCall || rep.kind == KindAskUser {
		name, input := anthropicTool(rep)
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", n), "name": name, "input": input}
	}
	return map[string]any{
		"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": model,
		"content": []any{block}, "stop_reason": anthropicStop(rep), "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": UsageInput, "output_tokens": UsageOutput,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}
}

// anthropicTool is the tool a tool-call reply calls and its input: Bash
// with the command, or AskUserQuestion with the question (askuser.go).
func anthropicTool(rep reply) (string, any) {
	if rep.kind == KindAskUser {
		return AnthropicAskToolName, askInput(rep.cmd)
	}
	return AnthropicToolName, commandArgs(rep.cmd)
}
