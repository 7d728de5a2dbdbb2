package modelstub

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// chatTurn is what a chat-completions stream decodes to.
type chatTurn struct {
	text   string
	calls  []map[string]any
	finish string
}

// decodeChat checks a chat-completions stream: data lines only, ending in
// [DONE] after a usage chunk with no choices; every other chunk a
// chat.completion.chunk with one choice, the first delta the assistant
// role, exactly one finish_reason on the last choice chunk.
func decodeChat(t *testing.T, evs []rawEvent, model string, n int) chatTurn {
	t.Helper()
	if len(evs) < 4 || evs[len(evs)-1].Data != "[DONE]" {
		t.Fatalf("stream %v: want at least role, finish, usage, [DONE]", evs)
	}
	var turn chatTurn
	for i, e := range evs[:len(evs)-1] {
		if e.Event != "" {
			t.Fatalf("event line %q in a chat stream", e.Event)
		}
		c := jsonObj(t, e.Data)
		if c["id"] != fmt.Sprintf("chatcmpl-%d", n) || c["object"] != "chat.completion.chunk" || c["model"] != model {
			t.Fatalf("chunk %v", c)
		}
		if created, _ := c["created"].(float64); created <= 0 {
			t.Fatalf("created %v", c["created"])
		}
		choices := c["choices"].([]any)
		if i == len(evs)-2 {
			u, _ := c["usage"].(map[string]any)
			if len(choices) != 0 || u["prompt_tokens"] != 10.0 || u["completion_tokens"] != 5.0 || u["total_tokens"] != 15.0 {
				t.Fatalf("usage chunk %v", c)
			}
			continue
		}
		if len(choices) != 1 {
			t.Fatalf("chunk %v: want one choice", c)
		}
		ch := choices[0].(map[string]any)
		delta := ch["delta"].(map[string]any)
		if ch["index"] != 0.0 {
			t.Fatalf("choice %v", ch)
		}
		finish, _ := ch["finish_reason"].(string)
		if (finish != "") != (i == len(evs)-3) {
			t.Fatalf("chunk %d finish_reason %v", i, ch["finish_reason"])
		}
		turn.finish += finish
		if i == 0 {
			if len(delta) != 2 || delta["role"] != "assistant" || delta["content"] != "" {
				t.Fatalf("first delta %v", delta)
			}
			continue
		}
		if s, ok := delta["content"].(string); ok {
			turn.text += s
		}
		if tcs, ok := delta["tool_calls"].([]any); ok {
			for _, tc := range tcs {
				turn.calls = append(turn.calls, tc.(map[string]any))
			}
		}
	}
	return turn
}

func chatBody(t *testing.T, tools []string, msgs ...any) string {
	t.Helper()
	ts := []any{}
	for _, n := range tools {
		ts = append(ts, map[string]any{"type": "function", "function": map[string]any{"name": n, "parameters": map[string]any{}}})
	}
	req := map[string]any{"model": "stub-model", "stream": true, "stream_options": map[string]any{"include_usage": true},
		"messages": append([]any{cMsg("system", "run: not from the system prompt")}, msgs...)}
	if tools != nil {
		req["tools"] = ts
	}
	return mustMarshal(t, req)
}

func cMsg(role string, content any) map[string]any {
	return map[string]any{"role": role, "content": content}
}

// TestChat_RulesOverMessages: the package rules on the chat-completions
// shapes OpenCode sends (table).
func TestChat_RulesOverMessages(t *testing.T) {
	bash := []string{"read", ChatToolName}
	call := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
		"id": "call_1", "type": "function", "function": map[string]any{"name": "bash", "arguments": "{}"}}}}
	result := map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "ok"}
	for _, tc := range []struct {
		name string
		body string
		kind string
		cmd  string
	}{
		{"plain", chatBody(t, bash, cMsg("user", "say hello")), KindText, ""},
		{"run line in string content", chatBody(t, bash, cMsg("user", "run: ls")), KindFunctionCall, "ls"},
		{"run line in text parts", chatBody(t, bash, cMsg("user", []any{map[string]any{"type": "text", "text": "ctx"},
			map[string]any{"type": "text", "text": "please\n  run: echo hi > made.txt \n"}})), KindFunctionCall, "echo hi > made.txt"},
		{"tool message last", chatBody(t, bash, cMsg("user", "run: true"), call, result), KindToolResult, ""},
		{"user after tool message", chatBody(t, bash, cMsg("user", "run: true"), call, result,
			cMsg("assistant", DoneText), cMsg("user", "say hello")), KindText, ""},
		{"bash not declared", chatBody(t, []string{"read"}, cMsg("user", "run: ls")), KindText, ""},
		{"no tools (title request)", chatBody(t, nil, cMsg("user", "run: ls")), KindText, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := New(t.Logf)
			srv := httptest.NewServer(stub)
			defer srv.Close()
			turn := decodeChat(t, postSSE(t, srv.URL, "/v1/chat/completions", tc.body), "stub-model", 1)
			switch tc.kind {
			case KindFunctionCall:
				if len(turn.calls) != 1 || turn.text != "" || turn.finish != "tool_calls" {
					t.Fatalf("turn %+v", turn)
				}
				c := turn.calls[0]
				fn := c["function"].(map[string]any)
				if c["index"] != 0.0 || c["id"] != "call_1" || c["type"] != "function" || fn["name"] != ChatToolName {
					t.Fatalf("tool call %v", c)
				}
				wantArgs(t, fn["arguments"], tc.cmd)
			default:
				want := HelloText
				if tc.kind == KindToolResult {
					want = DoneText
				}
				if len(turn.calls) != 0 || turn.text != want || turn.finish != "stop" {
					t.Fatalf("turn %+v, want %q", turn, want)
				}
			}
			st := stub.Stats()
			if st.ByAPI[APIChat] != 1 || st.ByKind[tc.kind] != 1 || st.Responses != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestChat_NonStreamedCompletion: without "stream":true the reply is one
// chat.completion body with the same decision.
func TestChat_NonStreamedCompletion(t *testing.T) {
	srv := httptest.NewServer(New(nil))
	defer srv.Close()
	unstreamed := func(body string) string { return strings.Replace(body, `"stream":true`, `"stream":false`, 1) }

	v := postJSON(t, srv.URL, "/v1/chat/completions", unstreamed(chatBody(t, nil, cMsg("user", "hi"))))
	ch := v["choices"].([]any)[0].(map[string]any)
	msg := ch["message"].(map[string]any)
	u := v["usage"].(map[string]any)
	if v["object"] != "chat.completion" || v["id"] != "chatcmpl-1" || msg["role"] != "assistant" || msg["content"] != HelloText ||
		ch["finish_reason"] != "stop" || u["total_tokens"] != 15.0 {
		t.Fatalf("completion %v", v)
	}

	v = postJSON(t, srv.URL, "/v1/chat/completions", unstreamed(chatBody(t, []string{"bash"}, cMsg("user", "run: ls"))))
	ch = v["choices"].([]any)[0].(map[string]any)
	msg = ch["message"].(map[string]any)
	calls, _ := msg["tool_calls"].([]any)
	if ch["finish_reason"] != "tool_calls" || msg["content"] != nil || len(calls) != 1 {
		t.Fatalf("completion %v", v)
	}
	call := calls[0].(map[string]any)
	if _, hasIndex := call["index"]; hasIndex || call["id"] != "call_2" {
		t.Fatalf("tool call %v", call)
	}
	wantArgs(t, call["function"].(map[string]any)["arguments"], "ls")
}
