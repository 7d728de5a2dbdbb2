package modelstub

// OpenAI chat completions (OpenCode, Pi, Qwen Code; Copilot and Kimi Code
// can speak it too): `POST /v1/chat/completions`. With
// "stream":true the reply is server-sent events `data: <chunk>` ending in
// `data: [DONE]`, each chunk a chat.completion.chunk
//
//	{id:"chatcmpl-N", object:"chat.completion.chunk", created:<unix s>, model:<request model>,
//	 choices:[{index:0, delta:{...}, finish_reason:null}]}
//
// with deltas, in order: {role:"assistant", content:""}; then {content:d}
// per text delta, or one {tool_calls:[{index:0, id:"call_N", type:"function",
// function:{name:<the shell tool: shelltools.go>, arguments:<JSON of
// {"command","description"}, or a classifier's>}}]};
// then {} with finish_reason "stop" or "tool_calls"; then a chunk with
// choices [] and usage {prompt_tokens:10, completion_tokens:5,
// total_tokens:15} (sent whatever stream_options says). Without
// "stream":true the reply is one chat.completion JSON body.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// chatRequest is the part of a chat-completions request the stub reads.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func (s *Stub) serveChat(w http.ResponseWriter, r *http.Request, n int) {
	var req chatRequest
	rep, ok := s.turn(w, r, n, APIChat, func(body []byte) (reply, error) {
		if err := json.Unmarshal(body, &req); err != nil {
			return reply{}, fmt.Errorf("body is not a chat-completions request: %w", err)
		}
		return decideChat(req), nil
	})
	if !ok {
		return
	}
	created := time.Now().Unix()
	if !req.Stream {
		s.writeJSON(w, n, chatCompletion(rep, n, req.Model, created))
		return
	}
	s.writeSSE(w, n, chatEvents(rep, n, req.Model, created))
}

// decideChat applies the package rules: a last message with role "tool"
// is rule 1; rule 2 reads the trailing user messages (Kimi Code sends a
// `<system-reminder>` user message after the prompt) and needs one of the
// shell tools of chatShellTools; a request whose only tool is
// ClassifierToolName (Qwen Code's side queries) gets a call of it.
func decideChat(req chatRequest) reply {
	msgs := req.Messages
	if len(msgs) > 0 && msgs[len(msgs)-1].Role == "tool" {
		return reply{kind: KindToolResult}
	}
	if len(req.Tools) == 1 && req.Tools[0].Function.Name == ClassifierToolName {
		return reply{kind: KindClassifier, tool: ClassifierToolName, args: classifierArgs(req.Tools[0].Function.Parameters)}
	}
	first := len(msgs)
	for first > 0 && msgs[first-1].Role == "user" {
		first--
	}
	texts := []string{}
	for _, m := range msgs[first:] {
		texts = append(texts, contentText(m.Content))
	}
	text := latestRun(texts)
	var declared []string
	for _, t := range req.Tools {
		if t.Type == "function" || t.Type == "" {
			declared = append(declared, t.Function.Name)
		}
	}
	tool := pickTool(chatShellTools, declared)
	rep := decideText(text).textOnly(tool != "")
	if rep.kind == KindFunctionCall {
		rep.tool = tool
	}
	return rep
}

// chatFinish is the finish_reason of a reply.
func chatFinish(rep reply) string {
	if rep.kind == KindFunctionCall || rep.kind == KindClassifier {
		return "tool_calls"
	}
	return "stop"
}

// chatToolCall is the tool_calls entry of a tool-call reply.
func chatToolCall(rep reply, n int) map[string]any {
	name, args := rep.tool, any(commandArgs(rep.cmd))
	if name == "" {
		name = ChatToolName
	}
	if rep.kind == KindClassifier {
		args = rep.args
	}
	return map[string]any{
		"index": 0, "id": fmt.Sprintf("call_%d", n), "type": "function",
		"function": map[string]any{"name": name, "arguments": string(mustJSON(args))},
	}
}

func chatUsage() map[string]any {
	return map[string]any{"prompt_tokens": UsageInput, "completion_tokens": UsageOutput, "total_tokens": UsageTotal}
}

// chatEvents builds the stream for a reply; n numbers the ids
// (chatcmpl-n, call_n).
func chatEvents(rep reply, n int, model string, created int64) []sseEvent {
	var out []sseEvent
	add := func(choices []any, usage map[string]any) {
		chunk := map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion.chunk",
			"created": created, "model": model, "choices": choices,
		}
		if usage != nil {
			chunk["usage"] = usage
		}
		out = append(out, sseEvent{data: mustJSON(chunk)})
	}
	delta := func(d map[string]any, finish any) {
		add([]any{map[string]any{"index": 0, "delta": d, "finish_reason": finish}}, nil)
	}
	delta(map[string]any{"role": "assistant", "content": ""}, nil)
	if rep.kind == KindFunctionCall || rep.kind == KindClassifier {
		delta(map[string]any{"tool_calls": []any{chatToolCall(rep, n)}}, nil)
	} else {
		for _, d := range rep.deltas() {
			delta(map[string]any{"content": d}, nil)
		}
	}
	delta(map[string]any{}, chatFinish(rep))
	add([]any{}, chatUsage())
	return append(out, sseEvent{data: []byte("[DONE]")})
}

// chatCompletion is the chat.completion body of a reply, for requests
// without "stream":true.
func chatCompletion(rep reply, n int, model string, created int64) map[string]any {
	msg := map[string]any{"role": "assistant", "content": strings.Join(rep.deltas(), "")}
	if rep.kind == KindFunctionCall || rep.kind == KindClassifier {
		call := chatToolCall(rep, n)
		delete(call, "index")
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}}
	}
	return map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": created, "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": chatFinish(rep)}},
		"usage":   chatUsage(),
	}
}
