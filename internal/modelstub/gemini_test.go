package modelstub

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

const geminiStream = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"

// geminiCand returns the single candidate of a chunk and its parts.
func geminiCand(t *testing.T, chunk map[string]any) (map[string]any, []any) {
	t.Helper()
	cands, ok := chunk["candidates"].([]any)
	if !ok || len(cands) != 1 {
		t.Fatalf("chunk %v: want one candidate", chunk)
	}
	c := cands[0].(map[string]any)
	content := c["content"].(map[string]any)
	if content["role"] != "model" || c["index"] != 0.0 {
		t.Fatalf("candidate %v", c)
	}
	return c, content["parts"].([]any)
}

// decodeGemini checks a streamGenerateContent stream (data lines only,
// finishReason, usageMetadata and modelVersion on the last chunk only) and
// returns the joined text and the functionCall parts.
func decodeGemini(t *testing.T, evs []rawEvent, model string) (text string, calls []map[string]any) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("empty stream")
	}
	for i, e := range evs {
		if e.Event != "" {
			t.Fatalf("event line %q in a Gemini stream", e.Event)
		}
		chunk := jsonObj(t, e.Data)
		c, parts := geminiCand(t, chunk)
		last := i == len(evs)-1
		_, hasFinish := c["finishReason"]
		_, hasUsage := chunk["usageMetadata"]
		if hasFinish != last || hasUsage != last {
			t.Fatalf("chunk %d of %d: %v", i, len(evs), chunk)
		}
		if last {
			u := chunk["usageMetadata"].(map[string]any)
			if c["finishReason"] != "STOP" || chunk["modelVersion"] != model || u["promptTokenCount"] != 10.0 ||
				u["candidatesTokenCount"] != 5.0 || u["totalTokenCount"] != 15.0 {
				t.Fatalf("final chunk %v", chunk)
			}
		}
		for _, p := range parts {
			p := p.(map[string]any)
			if fc, ok := p["functionCall"].(map[string]any); ok {
				calls = append(calls, fc)
			} else {
				text += p["text"].(string)
			}
		}
	}
	return text, calls
}

func gContent(role string, parts ...any) map[string]any {
	return map[string]any{"role": role, "parts": parts}
}

func gText(s string) map[string]any { return map[string]any{"text": s} }

func geminiBody(t *testing.T, decls []string, contents ...any) string {
	t.Helper()
	fds := []any{}
	for _, n := range decls {
		fds = append(fds, map[string]any{"name": n, "parametersJsonSchema": map[string]any{"type": "object"}})
	}
	return mustMarshal(t, map[string]any{"contents": contents,
		"systemInstruction": gContent("user", gText("run: not from the system")),
		"tools":             []any{map[string]any{"functionDeclarations": fds}}})
}

// TestGemini_RulesOverContents: the package rules on the request shapes
// Gemini CLI sends (table).
func TestGemini_RulesOverContents(t *testing.T) {
	shell := []string{"read_file", GeminiToolName}
	call := gContent("model", map[string]any{"functionCall": map[string]any{"name": GeminiToolName, "args": map[string]any{"command": "true"}}})
	resp := gContent("user", map[string]any{"functionResponse": map[string]any{"name": GeminiToolName, "response": map[string]any{"output": "ok"}}})
	for _, tc := range []struct {
		name string
		body string
		kind string
		cmd  string
	}{
		{"plain", geminiBody(t, shell, gContent("user", gText("say hello"))), KindText, ""},
		{"run line among parts", geminiBody(t, shell, gContent("user", gText("<session_context>x</session_context>"),
			gText("please\n run: echo hi > made.txt\n"))), KindFunctionCall, "echo hi > made.txt"},
		{"role omitted", geminiBody(t, shell, map[string]any{"parts": []any{gText("run: ls")}}), KindFunctionCall, "ls"},
		{"function response last", geminiBody(t, shell, gContent("user", gText("run: true")), call, resp), KindToolResult, ""},
		{"user after function response", geminiBody(t, shell, gContent("user", gText("run: true")), call, resp,
			gContent("model", gText(DoneText)), gContent("user", gText("say hello"))), KindText, ""},
		{"shell tool not declared", geminiBody(t, []string{"read_file"}, gContent("user", gText("run: ls"))), KindText, ""},
		{"no tools", mustMarshal(t, map[string]any{"contents": []any{gContent("user", gText("run: ls"))}}), KindText, ""},
		{"no contents", `{}`, KindText, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := New(t.Logf)
			srv := httptest.NewServer(stub)
			defer srv.Close()
			evs := postSSE(t, srv.URL, geminiStream, tc.body)
			text, calls := decodeGemini(t, evs, "gemini-2.5-pro")
			switch tc.kind {
			case KindFunctionCall:
				if len(evs) != 1 || len(calls) != 1 || text != "" || calls[0]["name"] != GeminiToolName {
					t.Fatalf("events %v", evs)
				}
				args := calls[0]["args"].(map[string]any)
				if len(args) != 2 || args["command"] != tc.cmd || args["description"] != CommandDescription {
					t.Fatalf("args %v", args)
				}
			case KindText:
				if len(evs) != len(HelloDeltas) || len(calls) != 0 || text != HelloText {
					t.Fatalf("text %q in %d chunks", text, len(evs))
				}
			case KindToolResult:
				if len(evs) != 1 || len(calls) != 0 || text != DoneText {
					t.Fatalf("text %q in %d chunks", text, len(evs))
				}
			}
			st := stub.Stats()
			if st.ByAPI[APIGemini] != 1 || st.ByKind[tc.kind] != 1 || st.Responses != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestGemini_RouterCountTokensAndRoutes: generateContent answers the
// router JSON, countTokens answers 10, both outside the rules; model names
// with dots route, malformed paths do not.
func TestGemini_RouterCountTokensAndRoutes(t *testing.T) {
	stub := New(nil)
	srv := httptest.NewServer(stub)
	defer srv.Close()
	body := geminiBody(t, nil, gContent("user", gText("run: ls")))
	v := postJSON(t, srv.URL, "/v1beta/models/gemini-2.5-flash-lite:generateContent", body)
	c, parts := geminiCand(t, v)
	u, _ := v["usageMetadata"].(map[string]any)
	if len(parts) != 1 || parts[0].(map[string]any)["text"] != GeminiRouterText || c["finishReason"] != "STOP" ||
		u["totalTokenCount"] != 15.0 {
		t.Fatalf("router reply %v", v)
	}
	var routed struct {
		Reasoning           string  `json:"reasoning"`
		ModelChoice         string  `json:"model_choice"`
		ComplexityReasoning string  `json:"complexity_reasoning"`
		ComplexityScore     float64 `json:"complexity_score"`
	}
	if err := json.Unmarshal([]byte(GeminiRouterText), &routed); err != nil || routed.Reasoning == "" ||
		routed.ModelChoice != "flash" || routed.ComplexityReasoning == "" || routed.ComplexityScore < 1 || routed.ComplexityScore > 100 {
		t.Fatalf("router text %s (%v)", GeminiRouterText, err)
	}
	if v := postJSON(t, srv.URL, "/v1beta/models/gemini-2.5-pro:countTokens", body); len(v) != 1 || v["totalTokens"] != 10.0 {
		t.Fatalf("countTokens %v", v)
	}
	if st := stub.Stats(); st.Auxiliary != 2 || st.Responses != 0 || len(st.Commands) != 0 {
		t.Fatalf("stats %+v", st)
	}

	for _, tc := range []struct {
		path, model, action string
		ok                  bool
	}{
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini-2.5-pro", "streamGenerateContent", true},
		{"/v1beta/models/gemini-3.5-flash:generateContent", "gemini-3.5-flash", "generateContent", true},
		{"/v1beta/models/a:b:countTokens", "a:b", "countTokens", true},
		{"/v1beta/models/gemini-2.5-pro", "", "", false},
		{"/v1beta/models/gemini-2.5-pro:embedContent", "", "", false},
		{"/v1beta/models/:countTokens", "", "", false},
		{"/v1beta/models/x/y:countTokens", "", "", false},
		{"/v1/models/gemini-2.5-pro:generateContent", "", "", false},
	} {
		model, action, ok := geminiRoute(tc.path)
		if model != tc.model || action != tc.action || ok != tc.ok {
			t.Errorf("geminiRoute(%q) = %q, %q, %v", tc.path, model, action, ok)
		}
	}
}
