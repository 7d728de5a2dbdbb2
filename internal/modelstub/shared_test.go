package modelstub

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// rawEvent is one server-sent event as written on the wire: Event is the
// `event:` line ("" if absent), Data the `data:` line.
type rawEvent struct {
	Event string
	Data  string
}

// postRaw sends body to url+path and returns the response; the caller
// closes it.
func postRaw(t *testing.T, url, path, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// postSSE posts body and strictly parses the 200 text/event-stream reply:
// only `event:` and `data:` lines, each event ended by a blank line, at
// most one of each per event, and a data line in every event.
func postSSE(t *testing.T, url, path, body string) []rawEvent {
	t.Helper()
	resp := postRaw(t, url, path, body)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: status %d", path, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("POST %s: content-type %q", path, ct)
	}
	var out []rawEvent
	var cur rawEvent
	open, sawData := false, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: ") && cur.Event == "" && !sawData:
			cur.Event, open = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: ") && !sawData:
			cur.Data, open, sawData = strings.TrimPrefix(line, "data: "), true, true
		case line == "" && sawData:
			out = append(out, cur)
			cur, open, sawData = rawEvent{}, false, false
		default:
			t.Fatalf("POST %s: unexpected SSE line %q", path, line)
		}
	}
	if open {
		t.Fatalf("POST %s: stream ended inside an event", path)
	}
	return out
}

// postJSON posts body, wants a 200 application/json reply and decodes it.
func postJSON(t *testing.T, url, path, body string) map[string]any {
	t.Helper()
	resp := postRaw(t, url, path, body)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("POST %s: status %d, content-type %q: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("POST %s: body %s: %v", path, raw, err)
	}
	return v
}

// status posts body and returns the status code.
func status(t *testing.T, url, method, path, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// jsonObj decodes one SSE data line as a JSON object.
func jsonObj(t *testing.T, data string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("data %q: %v", data, err)
	}
	return v
}

// mustMarshal is json.Marshal for test bodies.
func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantArgs checks tool-call arguments (a JSON string) are exactly
// {"command": cmd, "description": CommandDescription}.
func wantArgs(t *testing.T, args any, cmd string) {
	t.Helper()
	s, ok := args.(string)
	if !ok {
		t.Fatalf("arguments %v are not a string", args)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(s), &got); err != nil {
		t.Fatalf("arguments %q: %v", s, err)
	}
	if len(got) != 2 || got["command"] != cmd || got["description"] != CommandDescription {
		t.Fatalf("arguments %v, want command %q", got, cmd)
	}
}

// TestDecideText_RunLines: the shared rule 2/3 line parser.
func TestDecideText_RunLines(t *testing.T) {
	for _, tc := range []struct {
		text, cmd string // cmd "" means a text reply
	}{
		{"say hello", ""},
		{"run: ls -la", "ls -la"},
		{"please\n   run:   echo hi > made.txt  \nthanks", "echo hi > made.txt"},
		{"<system-reminder>ctx</system-reminder>\nrun: true\nrun: false", "true"},
		{"run:", ""},
		{"run:   \nrun: second", "second"},
		{"don't run: this", ""},
		{"RUN: ls", ""},
	} {
		rep := decideText(tc.text)
		if tc.cmd == "" && rep.kind != KindText || tc.cmd != "" && (rep.kind != KindFunctionCall || rep.cmd != tc.cmd) {
			t.Errorf("decideText(%q) = %+v, want cmd %q", tc.text, rep, tc.cmd)
		}
	}
}

// TestStub_OneStubServesAllAPIs: the four APIs share one Stats (ByAPI,
// ByKind, Commands in order), auxiliary answers and gzip bodies count, and
// unknown paths, methods and Gemini actions are 404s.
func TestStub_OneStubServesAllAPIs(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	stub := New(func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, fmt.Sprintf(f, a...))
	})
	srv := httptest.NewServer(stub)
	defer srv.Close()

	postSSE(t, srv.URL, "/v1/responses", `{"input":"run: one"}`)
	postSSE(t, srv.URL, "/v1/messages?beta=true", `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"run: two"}]}`)
	postSSE(t, srv.URL, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	postSSE(t, srv.URL, "/v1/chat/completions", `{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"bash"}}],"messages":[{"role":"user","content":"run: three"}]}`)

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	_ = zw.Close()
	resp := postRaw(t, srv.URL, "/v1/chat/completions", gz.String(), "Content-Encoding", "gzip")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("gzip chat status %d", resp.StatusCode)
	}

	postJSON(t, srv.URL, "/v1/messages/count_tokens?beta=true", `{"model":"m","messages":[]}`)
	postJSON(t, srv.URL, "/v1beta/models/gemini-2.5-flash:countTokens", `{}`)

	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/messages"},
		{"POST", "/v1/models"},
		{"POST", "/v1beta/models/gemini-2.5-pro:embedContent"},
		{"POST", "/v1beta/models/:streamGenerateContent"},
		{"POST", "/v1beta/models/a/b:streamGenerateContent"},
		{"POST", "/v1/chat/completions/x"},
	} {
		if code := status(t, srv.URL, tc.method, tc.path, "{}"); code != 404 {
			t.Errorf("%s %s: status %d, want 404", tc.method, tc.path, code)
		}
	}
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions",
		"/v1beta/models/g:streamGenerateContent", "/v1beta/models/g:generateContent", "/v1beta/models/g:countTokens"} {
		if code := status(t, srv.URL, "POST", path, "{nope"); code != 400 {
			t.Errorf("bad body to %s: status %d, want 400", path, code)
		}
	}

	st := stub.Stats()
	wantAPI := map[string]int{APIResponses: 1, APIAnthropic: 1, APIGemini: 1, APIChat: 2}
	for k, v := range wantAPI {
		if st.ByAPI[k] != v {
			t.Errorf("ByAPI[%s] = %d, want %d (%v)", k, st.ByAPI[k], v, st.ByAPI)
		}
	}
	if st.Requests != 19 || st.Responses != 5 || st.Auxiliary != 2 || st.NotFound != 6 || st.BadRequests != 6 ||
		st.ByKind[KindFunctionCall] != 3 || st.ByKind[KindText] != 2 {
		t.Errorf("stats %+v", st)
	}
	if strings.Join(st.Commands, ",") != "one,two,three" {
		t.Errorf("commands %v", st.Commands)
	}
	mu.Lock()
	if len(logs) != st.Requests {
		t.Errorf("%d log lines for %d requests", len(logs), st.Requests)
	}
	for _, l := range logs {
		if strings.Contains(l, "run:") || strings.Contains(l, "alt=sse") || strings.Contains(l, "beta=true") {
			t.Errorf("log line leaks a body or query: %q", l)
		}
	}
	mu.Unlock()
	st.ByAPI[APIChat] = 99
	if stub.Stats().ByAPI[APIChat] != 2 {
		t.Error("Stats() shares its ByAPI map with the stub")
	}
}
