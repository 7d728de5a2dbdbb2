package modelstub

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestResponses_CopilotBashArgumentsAddUpAndCompletedCarriesOutput: a
// Responses request declaring `bash` (Copilot) or `Bash` (Kimi Code) and
// not exec_command gets a call of that tool with {command, description};
// the argument deltas add up to the final arguments (Kimi Code retries
// without end otherwise) and response.completed carries the item in
// `output` (Copilot builds its answer from it: AGENTS-OFFLINE-MORE.md).
func TestResponses_CopilotBashArgumentsAddUpAndCompletedCarriesOutput(t *testing.T) {
	for _, tool := range []string{ChatToolName, CapitalBashToolName} {
		t.Run(tool, func(t *testing.T) {
			stub := New(t.Logf)
			srv := httptest.NewServer(stub)
			defer srv.Close()
			req := map[string]any{"model": "stub-model", "stream": true, "input": []any{userMsg("please\nrun: echo hi > made.txt")},
				"tools": []any{map[string]any{"type": "function", "name": "view"}, map[string]any{"type": "function", "name": tool}}}
			evs := post(t, srv.URL, mustMarshal(t, req))
			var pieces strings.Builder
			var final, doneArgs string
			for _, e := range evs {
				switch e.Type {
				case "response.function_call_arguments.delta":
					pieces.WriteString(e.Data["delta"].(string))
				case "response.function_call_arguments.done":
					final = e.Data["arguments"].(string)
				case "response.output_item.done":
					item := e.Data["item"].(map[string]any)
					if item["name"] != tool {
						t.Fatalf("called %v, want %s", item["name"], tool)
					}
					doneArgs = item["arguments"].(string)
				}
			}
			if pieces.Len() == 0 || pieces.String() != final || final != doneArgs {
				t.Fatalf("deltas %q, arguments.done %q, item %q: they must add up", pieces.String(), final, doneArgs)
			}
			wantArgs(t, final, "echo hi > made.txt")
			out := evs[len(evs)-1].Data["response"].(map[string]any)["output"].([]any)
			if len(out) != 1 || out[0].(map[string]any)["arguments"] != final {
				t.Fatalf("response.completed output %v", out)
			}
			assertCompletedUsage(t, evs)

			// A text reply is in `output` too.
			evs = post(t, srv.URL, body(t, userMsg("say hello")))
			out = evs[len(evs)-1].Data["response"].(map[string]any)["output"].([]any)
			part := out[0].(map[string]any)["content"].([]any)[0].(map[string]any)
			if part["text"] != HelloText {
				t.Fatalf("response.completed output %v", out)
			}
		})
	}
}

// TestResponses_TrailingUserMessagesAreOneText: Kimi Code follows the
// prompt with a `<system-reminder>` user message; the `run:` line of the
// prompt still counts.
func TestResponses_TrailingUserMessagesAreOneText(t *testing.T) {
	stub := New(nil)
	srv := httptest.NewServer(stub)
	defer srv.Close()
	evs := post(t, srv.URL, body(t, userMsg("run: touch k.txt"), userMsg("<system-reminder>Today's date is X.</system-reminder>")))
	if item := evs[1].Data["item"].(map[string]any); item["type"] != "function_call" {
		t.Fatalf("events %v", types(evs))
	}
	if st := stub.Stats(); len(st.Commands) != 1 || st.Commands[0] != "touch k.txt" {
		t.Fatalf("commands %v", st.Commands)
	}
}

// TestChat_ShellToolPerAgent: on chat completions the stub calls the shell
// tool the request declares (Kimi Code's Bash, Qwen Code's
// run_shell_command) and reads the trailing user messages.
func TestChat_ShellToolPerAgent(t *testing.T) {
	for _, tool := range []string{CapitalBashToolName, QwenShellToolName} {
		stub := New(t.Logf)
		srv := httptest.NewServer(stub)
		b := chatBody(t, []string{"read_file", tool}, cMsg("user", "run: ls"), cMsg("user", "<system-reminder>date</system-reminder>"))
		turn := decodeChat(t, postSSE(t, srv.URL, "/v1/chat/completions", b), "stub-model", 1)
		srv.Close()
		if len(turn.calls) != 1 || turn.finish != "tool_calls" {
			t.Fatalf("%s: turn %+v", tool, turn)
		}
		fn := turn.calls[0]["function"].(map[string]any)
		if fn["name"] != tool {
			t.Fatalf("called %v, want %s", fn["name"], tool)
		}
		wantArgs(t, fn["arguments"], "ls")
	}
}

// TestChat_QwenClassifierGetsRespondInSchema: Qwen Code's permission
// classifier (mode auto) forces a non-streamed request onto its one tool
// respond_in_schema; the stub calls it with every schema property filled
// (shouldBlock false), counted as KindClassifier, never as a command.
func TestChat_QwenClassifierGetsRespondInSchema(t *testing.T) {
	stub := New(t.Logf)
	srv := httptest.NewServer(stub)
	defer srv.Close()
	schema := map[string]any{"type": "object", "required": []string{"thinking", "shouldBlock", "reason"},
		"properties": map[string]any{"thinking": map[string]any{"type": "string"}, "shouldBlock": map[string]any{"type": "boolean"},
			"reason": map[string]any{"type": "string"}}}
	req := map[string]any{"model": "stub-model", "stream": false, "tool_choice": "required", "temperature": 0, "max_tokens": 256,
		"messages": []any{cMsg("user", "run: rm -rf /")},
		"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": ClassifierToolName, "parameters": schema}}}}
	v := postJSON(t, srv.URL, "/v1/chat/completions", mustMarshal(t, req))
	ch := v["choices"].([]any)[0].(map[string]any)
	calls := ch["message"].(map[string]any)["tool_calls"].([]any)
	fn := calls[0].(map[string]any)["function"].(map[string]any)
	var args map[string]any
	if err := json.Unmarshal([]byte(fn["arguments"].(string)), &args); err != nil || fn["name"] != ClassifierToolName {
		t.Fatalf("call %v: %v", fn, err)
	}
	if args["shouldBlock"] != false || args["reason"] != ClassifierReason || args["thinking"] != ClassifierReason || ch["finish_reason"] != "tool_calls" {
		t.Fatalf("arguments %v, finish %v", args, ch["finish_reason"])
	}
	if st := stub.Stats(); st.ByKind[KindClassifier] != 1 || len(st.Commands) != 0 {
		t.Fatalf("stats %+v", st)
	}
}
