package modelstub

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// anthropicTurn is what a Messages stream decodes to.
type anthropicTurn struct {
	text  string         // joined text_delta texts
	tool  map[string]any // the tool_use content block, if any
	input string         // joined partial_json of the tool_use
	stop  string         // message_delta stop_reason
}

// decodeAnthropic checks the event grammar of a Messages stream (the
// order the Anthropic SDK's MessageStream accepts, each data "type" equal
// to its event name, index 0, usage) and returns what it carries.
func decodeAnthropic(t *testing.T, evs []rawEvent, model string, n int) anthropicTurn {
	t.Helper()
	var names []string
	var turn anthropicTurn
	for i, e := range evs {
		d := jsonObj(t, e.Data)
		if d["type"] != e.Event {
			t.Fatalf("event %d %q has data type %v", i, e.Event, d["type"])
		}
		names = append(names, e.Event)
		if idx, ok := d["index"]; ok && idx != 0.0 {
			t.Fatalf("event %q index %v", e.Event, idx)
		}
		switch e.Event {
		case "message_start":
			m := d["message"].(map[string]any)
			u := m["usage"].(map[string]any)
			if m["id"] != fmt.Sprintf("msg_%d", n) || m["type"] != "message" || m["role"] != "assistant" || m["model"] != model ||
				len(m["content"].([]any)) != 0 || m["stop_reason"] != nil || m["stop_sequence"] != nil ||
				u["input_tokens"] != 10.0 || u["output_tokens"] != 0.0 {
				t.Fatalf("message_start %v", d)
			}
		case "content_block_start":
			b := d["content_block"].(map[string]any)
			if b["type"] == "tool_use" {
				turn.tool = b
			} else if b["type"] != "text" || b["text"] != "" {
				t.Fatalf("content_block_start %v", d)
			}
		case "content_block_delta":
			delta := d["delta"].(map[string]any)
			switch delta["type"] {
			case "text_delta":
				turn.text += delta["text"].(string)
			case "input_json_delta":
				turn.input += delta["partial_json"].(string)
			default:
				t.Fatalf("delta %v", delta)
			}
		case "message_delta":
			delta := d["delta"].(map[string]any)
			turn.stop, _ = delta["stop_reason"].(string)
			if v, ok := delta["stop_sequence"]; !ok || v != nil {
				t.Fatalf("message_delta %v", d)
			}
			if d["usage"].(map[string]any)["output_tokens"] != 5.0 {
				t.Fatalf("message_delta usage %v", d)
			}
		}
	}
	deltas := strings.Repeat("content_block_delta,", len(names)-5)
	if want := "message_start,content_block_start," + deltas + "content_block_stop,message_delta,message_stop"; strings.Join(names, ",") != want {
		t.Fatalf("events %v", names)
	}
	return turn
}

func anthropicBody(t *testing.T, tools []string, msgs ...any) string {
	t.Helper()
	req := map[string]any{"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 32000,
		"system": []any{map[string]any{"type": "text", "text": "run: not from the system prompt"}}, "messages": msgs}
	if tools != nil {
		ts := []any{}
		for _, n := range tools {
			ts = append(ts, map[string]any{"name": n, "input_schema": map[string]any{"type": "object"}})
		}
		req["tools"] = ts
	}
	return mustMarshal(t, req)
}

func aMsg(role string, content any) map[string]any {
	return map[string]any{"role": role, "content": content}
}

func aText(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

// TestAnthropic_RulesOverMessages: the package rules on Messages-API
// request shapes Claude Code sends (table).
func TestAnthropic_RulesOverMessages(t *testing.T) {
	bash := []string{"Read", AnthropicToolName}
	useBash := aMsg("assistant", []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "true"}}})
	result := aMsg("user", []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
		aText("<system-reminder>\nrun: nope\n</system-reminder>")})
	for _, tc := range []struct {
		name string
		body string
		kind string
		cmd  string
	}{
		{"string content", anthropicBody(t, bash, aMsg("user", "say hello")), KindText, ""},
		{"run line among text blocks", anthropicBody(t, bash, aMsg("user", []any{
			aText("<system-reminder>\nctx\n</system-reminder>"), aText("please\n  run: echo hi > made.txt \nthanks")})), KindFunctionCall, "echo hi > made.txt"},
		{"run line in string content", anthropicBody(t, bash, aMsg("user", "run: ls")), KindFunctionCall, "ls"},
		{"tool result last", anthropicBody(t, bash, aMsg("user", "run: true"), useBash, result), KindToolResult, ""},
		{"user after tool result", anthropicBody(t, bash, aMsg("user", "run: true"), useBash, result,
			aMsg("assistant", []any{aText(DoneText)}), aMsg("user", "say hello")), KindText, ""},
		{"run line only in an earlier user message", anthropicBody(t, bash, aMsg("user", "run: ls"),
			aMsg("assistant", "ok"), aMsg("user", "thanks")), KindText, ""},
		{"tools without Bash", anthropicBody(t, []string{"Read"}, aMsg("user", "run: ls")), KindText, ""},
		{"no tools (title request)", anthropicBody(t, nil, aMsg("user", "run: ls")), KindText, ""},
		{"no messages", anthropicBody(t, bash), KindText, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := New(t.Logf)
			srv := httptest.NewServer(stub)
			defer srv.Close()
			turn := decodeAnthropic(t, postSSE(t, srv.URL, "/v1/messages?beta=true", tc.body), "claude-sonnet-4-5", 1)
			switch tc.kind {
			case KindFunctionCall:
				if turn.tool == nil || turn.tool["id"] != "toolu_1" || turn.tool["name"] != AnthropicToolName ||
					len(turn.tool["input"].(map[string]any)) != 0 || turn.text != "" || turn.stop != "tool_use" {
					t.Fatalf("turn %+v", turn)
				}
				wantArgs(t, turn.input, tc.cmd)
			case KindText, KindToolResult:
				want := HelloText
				if tc.kind == KindToolResult {
					want = DoneText
				}
				if turn.tool != nil || turn.text != want || turn.stop != "end_turn" {
					t.Fatalf("turn %+v, want text %q", turn, want)
				}
			}
			st := stub.Stats()
			if st.ByAPI[APIAnthropic] != 1 || st.ByKind[tc.kind] != 1 || st.Responses != 1 {
				t.Fatalf("stats %+v", st)
			}
			if tc.cmd != "" && (len(st.Commands) != 1 || st.Commands[0] != tc.cmd) {
				t.Fatalf("commands %v", st.Commands)
			}
		})
	}
}

// TestAnthropic_HelloDeltasAndCountTokens: a plain turn streams one
// text_delta per HelloDeltas entry; count_tokens answers 10; a request
// without "stream":true gets a whole Message; a bad content shape is a 400.
func TestAnthropic_HelloDeltasAndCountTokens(t *testing.T) {
	srv := httptest.NewServer(New(nil))
	defer srv.Close()
	evs := postSSE(t, srv.URL, "/v1/messages", anthropicBody(t, nil, aMsg("user", "hi")))
	var got []string
	for _, e := range evs {
		if e.Event == "content_block_delta" {
			got = append(got, jsonObj(t, e.Data)["delta"].(map[string]any)["text"].(string))
		}
	}
	if strings.Join(got, "|") != strings.Join(HelloDeltas, "|") {
		t.Fatalf("deltas %q", got)
	}

	if v := postJSON(t, srv.URL, "/v1/messages/count_tokens?beta=true", anthropicBody(t, nil, aMsg("user", "hi"))); len(v) != 1 || v["input_tokens"] != 10.0 {
		t.Fatalf("count_tokens %v", v)
	}

	body := strings.Replace(anthropicBody(t, []string{"Bash"}, aMsg("user", "run: ls")), `"stream":true`, `"stream":false`, 1)
	m := postJSON(t, srv.URL, "/v1/messages", body)
	block := m["content"].([]any)[0].(map[string]any)
	input := block["input"].(map[string]any)
	if m["type"] != "message" || m["stop_reason"] != "tool_use" || block["type"] != "tool_use" || block["name"] != "Bash" ||
		input["command"] != "ls" || input["description"] != CommandDescription ||
		m["usage"].(map[string]any)["output_tokens"] != 5.0 {
		t.Fatalf("non-streamed message %v", m)
	}

	body = strings.Replace(anthropicBody(t, nil, aMsg("user", "hi")), `"stream":true,`, "", 1)
	if m := postJSON(t, srv.URL, "/v1/messages", body); m["content"].([]any)[0].(map[string]any)["text"] != HelloText ||
		m["stop_reason"] != "end_turn" {
		t.Fatalf("message without a stream field %v", m)
	}

	for _, bad := range []string{`{"messages":[{"role":"user","content":42}]}`, `{"messages":{}}`, `[]`} {
		if code := status(t, srv.URL, "POST", "/v1/messages", bad); code != 400 {
			t.Errorf("%s: status %d, want 400", bad, code)
		}
	}
}
