package modelstub

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sse is one parsed server-sent event.
type sse struct {
	Type string
	Data map[string]any
}

func post(t *testing.T, url, body string) []sse {
	t.Helper()
	resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content-type %q", ct)
	}
	var out []sse
	sc := bufio.NewScanner(resp.Body)
	var cur sse
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.Type = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.Data); err != nil {
				t.Fatalf("data line: %v", err)
			}
		case line == "":
			if cur.Data["type"] != cur.Type {
				t.Fatalf("event %q has data type %v", cur.Type, cur.Data["type"])
			}
			out = append(out, cur)
			cur = sse{}
		}
	}
	if cur.Type != "" {
		t.Fatalf("stream ended inside an event")
	}
	return out
}

func types(evs []sse) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func userMsg(text string) map[string]any {
	return map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": text}}}
}

func body(t *testing.T, items ...any) string {
	b, err := json.Marshal(map[string]any{"model": "x", "stream": true, "input": items})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func assertCompletedUsage(t *testing.T, evs []sse) {
	t.Helper()
	last := evs[len(evs)-1]
	if last.Type != "response.completed" {
		t.Fatalf("last event %q", last.Type)
	}
	u := last.Data["response"].(map[string]any)["usage"].(map[string]any)
	if u["input_tokens"] != 10.0 || u["output_tokens"] != 5.0 || u["total_tokens"] != 15.0 {
		t.Fatalf("usage %v", u)
	}
}

// TestResponses_PlainTextStreamsHelloInDeltas: rule 3 of the package doc,
// event order codex-acp 0.16 reads (testdata/codex-transcript.md).
func TestResponses_PlainTextStreamsHelloInDeltas(t *testing.T) {
	srv := httptest.NewServer(New(t.Logf))
	defer srv.Close()
	evs := post(t, srv.URL, body(t, map[string]any{"type": "message", "role": "developer", "content": "run: nope"}, userMsg("say hello")))
	want := []string{"response.created", "response.output_item.added", "response.output_text.delta",
		"response.output_text.delta", "response.output_text.delta", "response.output_item.done", "response.completed"}
	if strings.Join(types(evs), ",") != strings.Join(want, ",") {
		t.Fatalf("events %v", types(evs))
	}
	var text strings.Builder
	for _, e := range evs[2:5] {
		text.WriteString(e.Data["delta"].(string))
	}
	if text.String() != HelloText {
		t.Fatalf("deltas %q", text.String())
	}
	done := evs[5].Data["item"].(map[string]any)
	part := done["content"].([]any)[0].(map[string]any)
	if part["type"] != "output_text" || part["text"] != HelloText {
		t.Fatalf("done item %v", done)
	}
	assertCompletedUsage(t, evs)
}

// TestResponses_RunLineBecomesEscalatedExecCommand: rule 2 (see
// testdata/codex-transcript.md for the shapes codex-acp 0.16 sends).
func TestResponses_RunLineBecomesEscalatedExecCommand(t *testing.T) {
	stub := New(nil)
	srv := httptest.NewServer(stub)
	defer srv.Close()
	evs := post(t, srv.URL, body(t, userMsg("please\n  run: echo hi > made.txt  \nthanks")))
	if strings.Join(types(evs), ",") != "response.created,response.output_item.added,response.function_call_arguments.delta,"+
		"response.function_call_arguments.delta,response.function_call_arguments.done,response.output_item.done,response.completed" {
		t.Fatalf("events %v", types(evs))
	}
	item := evs[5].Data["item"].(map[string]any)
	if item["type"] != "function_call" || item["name"] != "exec_command" || item["call_id"] == "" {
		t.Fatalf("item %v", item)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(item["arguments"].(string)), &args); err != nil {
		t.Fatal(err)
	}
	if args["cmd"] != "echo hi > made.txt" || args["sandbox_permissions"] != "require_escalated" || args["justification"] == "" {
		t.Fatalf("arguments %v", args)
	}
	assertCompletedUsage(t, evs)
	if st := stub.Stats(); st.ByKind[KindFunctionCall] != 1 || len(st.Commands) != 1 || st.Commands[0] != "echo hi > made.txt" {
		t.Fatalf("stats %+v", st)
	}
}

// TestResponses_ToolOutputAfterLastUserGetsDone: rule 1; an output from an
// earlier turn (before the latest user message) does not count.
func TestResponses_ToolOutputAfterLastUserGetsDone(t *testing.T) {
	srv := httptest.NewServer(New(nil))
	defer srv.Close()
	call := map[string]any{"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"}
	out := map[string]any{"type": "function_call_output", "call_id": "c1", "output": "ok"}
	evs := post(t, srv.URL, body(t, userMsg("run: true"), call, out))
	if evs[2].Data["delta"] != DoneText {
		t.Fatalf("events %v", evs)
	}
	assertCompletedUsage(t, evs)
	evs = post(t, srv.URL, body(t, userMsg("run: true"), call, out, userMsg("say hello")))
	if len(evs) != 7 || evs[2].Data["delta"] != HelloDeltas[0] {
		t.Fatalf("later user message: events %v", types(evs))
	}
	evs = post(t, srv.URL, `{"input":"run: ls"}`)
	if evs[1].Data["item"].(map[string]any)["type"] != "function_call" {
		t.Fatalf("string input: %v", types(evs))
	}
}

// TestStub_StatsAnd404: GET /stats counts; unknown paths and bad bodies are
// refused and counted.
func TestStub_StatsAnd404(t *testing.T) {
	var logs []string
	stub := New(func(f string, a ...any) { logs = append(logs, f) })
	srv := httptest.NewServer(stub)
	defer srv.Close()
	post(t, srv.URL, body(t, userMsg("hi")))
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("/v1/models status %d", resp.StatusCode)
	}
	resp, err = http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader("{nope"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("bad body status %d", resp.StatusCode)
	}
	resp, err = http.Get(srv.URL + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var st Stats
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("stats %s: %v", raw, err)
	}
	if st.Requests != 4 || st.Responses != 1 || st.NotFound != 1 || st.BadRequests != 1 || st.ByKind[KindText] != 1 {
		t.Fatalf("stats %+v", st)
	}
	if len(logs) < 3 {
		t.Fatalf("expected a log line per request, got %v", logs)
	}
}

// TestWriteCodexHome_WritesLoopbackProvider: the config.toml of
// docs/agents.md, with /v1 appended once.
func TestWriteCodexHome_WritesLoopbackProvider(t *testing.T) {
	for _, base := range []string{"http://127.0.0.1:4242", "http://127.0.0.1:4242/", "http://127.0.0.1:4242/v1"} {
		dir := filepath.Join(t.TempDir(), "home")
		if err := WriteCodexHome(dir, base); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "config.toml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`model_provider = "local"`, `[model_providers.local]`,
			`base_url = "http://127.0.0.1:4242/v1"`, `env_key = "OPENAI_API_KEY"`, `wire_api = "responses"`} {
			if !strings.Contains(string(b), want+"\n") {
				t.Errorf("%s: config lacks %q:\n%s", base, want, b)
			}
		}
	}
	for _, bad := range []string{"127.0.0.1:1", "ftp://x", "http://x/\"", ""} {
		if err := WriteCodexHome(t.TempDir(), bad); err == nil {
			t.Errorf("WriteCodexHome(%q) succeeded", bad)
		}
	}
}
