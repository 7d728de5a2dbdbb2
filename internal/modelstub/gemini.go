package modelstub

// The Gemini API (Gemini CLI), under `/v1beta/models/{model}:{action}`;
// model names may hold dots and dashes (gemini-2.5-pro), never a slash:
//
//   - streamGenerateContent (Gemini CLI adds `?alt=sse`; the query is
//     ignored): server-sent events with `data: <json>` lines only. A text
//     reply is one chunk per delta,
//     {"candidates":[{"content":{"role":"model","parts":[{"text":d}]},"index":0}]},
//     the last one adding "finishReason":"STOP" to the candidate and the
//     top-level "usageMetadata":{"promptTokenCount":10,
//     "candidatesTokenCount":5,"totalTokenCount":15} and "modelVersion".
//     A tool call is one such final chunk whose only part is
//     {"functionCall":{"name":"run_shell_command","args":{"command":cmd,
//     "description":CommandDescription}}}.
//   - generateContent (not streamed; Gemini CLI's model routers ask it for
//     JSON matching a response schema): always GeminiRouterText as the
//     text of one finished candidate. It is outside the rules (counted in
//     Stats.Auxiliary).
//   - countTokens: {"totalTokens":10}.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// GeminiRouterText is the text of every `:generateContent` reply: one JSON
// object that satisfies both of Gemini CLI's model routers, the classifier
// ({reasoning, model_choice: "flash"|"pro"}) and the numerical classifier
// ({complexity_reasoning, complexity_score: 1..100}), choosing the simple
// (flash) side of each.
const GeminiRouterText = `{"reasoning":"stub","model_choice":"flash","complexity_reasoning":"stub","complexity_score":1}`

const geminiPrefix = "/v1beta/models/"

// geminiRoute splits a Gemini path into model and action; ok is false
// unless the path is geminiPrefix + model + ":" + a known action.
func geminiRoute(path string) (model, action string, ok bool) {
	rest, found := strings.CutPrefix(path, geminiPrefix)
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 || strings.Contains(rest[:i], "/") {
		return "", "", false
	}
	model, action = rest[:i], rest[i+1:]
	switch action {
	case "streamGenerateContent", "generateContent", "countTokens":
		return model, action, true
	}
	return "", "", false
}

// geminiPart is the part of a Gemini content part the stub reads.
type geminiPart struct {
	Text             string          `json:"text"`
	FunctionResponse json.RawMessage `json:"functionResponse"`
}

// geminiRequest is the part of a generateContent request the stub reads.
type geminiRequest struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

func (s *Stub) serveGemini(w http.ResponseWriter, r *http.Request, n int, model, action string) {
	switch action {
	case "countTokens":
		s.serveAux(w, r, n, map[string]int{"totalTokens": UsageInput})
		return
	case "generateContent":
		s.serveAux(w, r, n, geminiChunk(model, []any{map[string]any{"text": GeminiRouterText}}, true))
		return
	}
	rep, ok := s.turn(w, r, n, APIGemini, decideGemini)
	if !ok {
		return
	}
	s.writeSSE(w, n, geminiEvents(rep, model))
}

// decideGemini applies the package rules: a functionResponse part in the
// last content is rule 1; rule 2 reads the text parts of the last content
// with role "user" (or no role), and needs a function declaration named
// GeminiToolName.
func decideGemini(body []byte) (reply, error) {
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return reply{}, fmt.Errorf("body is not a generateContent request: %w", err)
	}
	if len(req.Contents) == 0 {
		return reply{kind: KindText}, nil
	}
	for _, p := range req.Contents[len(req.Contents)-1].Parts {
		if len(p.FunctionResponse) > 0 && string(p.FunctionResponse) != "null" {
			return reply{kind: KindToolResult}, nil
		}
	}
	var text string
	for i := len(req.Contents) - 1; i >= 0; i-- {
		if c := req.Contents[i]; c.Role == "user" || c.Role == "" {
			texts := make([]string, 0, len(c.Parts))
			for _, p := range c.Parts {
				texts = append(texts, p.Text)
			}
			text = strings.Join(texts, "\n")
			break
		}
	}
	allowed := false
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			allowed = allowed || f.Name == GeminiToolName
		}
	}
	return decideText(text).textOnly(allowed), nil
}

// geminiChunk is one GenerateContentResponse with a single candidate
// holding parts; final adds finishReason, usageMetadata and modelVersion.
func geminiChunk(model string, parts []any, final bool) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	chunk := map[string]any{"candidates": []any{cand}}
	if final {
		cand["finishReason"] = "STOP"
		chunk["usageMetadata"] = map[string]any{
			"promptTokenCount": UsageInput, "candidatesTokenCount": UsageOutput, "totalTokenCount": UsageTotal,
		}
		chunk["modelVersion"] = model
	}
	return chunk
}

// geminiEvents builds the data-only stream for a reply.
func geminiEvents(rep reply, model string) []sseEvent {
	if rep.kind == KindFunctionCall {
		part := map[string]any{"functionCall": map[string]any{"name": GeminiToolName, "args": commandArgs(rep.cmd)}}
		return []sseEvent{{data: mustJSON(geminiChunk(model, []any{part}, true))}}
	}
	deltas := rep.deltas()
	out := make([]sseEvent, 0, len(deltas))
	for i, d := range deltas {
		chunk := geminiChunk(model, []any{map[string]any{"text": d}}, i == len(deltas)-1)
		out = append(out, sseEvent{data: mustJSON(chunk)})
	}
	return out
}
