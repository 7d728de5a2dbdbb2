// Package modelstub is a deterministic loopback stand-in for the OpenAI
// Responses API, good enough to drive the real codex-acp agent offline
// (shared/design/CODEX-OFFLINE.md, "Pointing Codex at a loopback model").
//
// The stub answers only `POST /v1/responses` (always as a stream of
// server-sent events) and `GET /stats`; every other path is a 404 with a log
// line. The reply is chosen from the request body alone:
//
//  1. a `function_call_output` item after the last user message in `input`
//     -> an assistant message "Done: the command ran.";
//  2. else the last user message has a line `run: <shell command>` -> a
//     `function_call` to `exec_command` with that cmd,
//     `"sandbox_permissions":"require_escalated"` and a justification;
//  3. else -> the text "Hello from the loopback model." split into three
//     `response.output_text.delta` events.
//
// Every reply ends with `response.completed` carrying usage
// {input_tokens:10, output_tokens:5, total_tokens:15}.
//
// The stub never logs request headers (they carry the API key) nor request
// bodies (they carry the user's prompt and environment).
package modelstub

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Texts and names the stub uses in its replies; tests match on them.
const (
	// HelloText is the assistant text of a plain turn (rule 3), sent as
	// the deltas in HelloDeltas.
	HelloText = "Hello from the loopback model."
	// DoneText is the assistant text after a tool result (rule 1).
	DoneText = "Done: the command ran."
	// ToolName is the function the stub calls for `run:` lines (rule 2);
	// codex refuses `shell` as unsupported (CODEX-OFFLINE.md).
	ToolName = "exec_command"
	// Justification is the "justification" argument of the tool call.
	Justification = "The user asked to run this command."
	// RunPrefix starts the line of a user message that asks for a tool call.
	RunPrefix = "run:"

	// UsageInput, UsageOutput and UsageTotal are the token counts every
	// reply reports in `response.completed`.
	UsageInput  = 10
	UsageOutput = 5
	UsageTotal  = 15

	// maxBody bounds a request body (bytes); codex sends the whole
	// conversation plus tool schemas, a few hundred KiB at most.
	maxBody = 32 << 20
)

// HelloDeltas is HelloText cut into the `response.output_text.delta`
// payloads of a plain turn, in order.
var HelloDeltas = []string{"Hello ", "from the loopback ", "model."}

// Reply kinds, as counted in Stats.ByKind and logged per request.
const (
	KindText         = "text"
	KindFunctionCall = "function_call"
	KindToolResult   = "tool_result"
)

// Stats is the JSON body of `GET /stats`: counters since the stub started.
type Stats struct {
	// Requests counts every HTTP request, any path or method.
	Requests int `json:"requests"`
	// Responses counts `POST /v1/responses` answered with a stream.
	Responses int `json:"responses"`
	// ByKind counts the streamed replies by kind (KindText,
	// KindFunctionCall, KindToolResult).
	ByKind map[string]int `json:"byKind"`
	// Commands lists, in order, the `cmd` of every function_call sent.
	Commands []string `json:"commands"`
	// NotFound counts requests answered 404.
	NotFound int `json:"notFound"`
	// BadRequests counts `POST /v1/responses` bodies that were not JSON
	// (answered 400).
	BadRequests int `json:"badRequests"`
}

// Stub is the http.Handler of the loopback model. The zero value is not
// usable; build one with New. A Stub is safe for concurrent use.
type Stub struct {
	logf func(format string, args ...any)

	mu    sync.Mutex
	stats Stats
}

// New returns a Stub that logs one line per request through logf (nil means
// no logging). Log lines hold method, path, reply kind and ids only.
func New(logf func(format string, args ...any)) *Stub {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Stub{logf: logf, stats: Stats{ByKind: map[string]int{}, Commands: []string{}}}
}

// Stats returns a copy of the counters (the same data as `GET /stats`).
func (s *Stub) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.stats
	out.ByKind = make(map[string]int, len(s.stats.ByKind))
	for k, v := range s.stats.ByKind {
		out.ByKind[k] = v
	}
	out.Commands = append([]string{}, s.stats.Commands...)
	return out
}

// ServeHTTP implements http.Handler: `POST /v1/responses`, `GET /stats`,
// 404 otherwise.
func (s *Stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.stats.Requests++
	n := s.stats.Requests
	s.mu.Unlock()

	switch {
	case r.URL.Path == "/v1/responses" && r.Method == http.MethodPost:
		s.serveResponses(w, r, n)
	case r.URL.Path == "/stats" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Stats())
	default:
		s.mu.Lock()
		s.stats.NotFound++
		s.mu.Unlock()
		s.logf("modelstub: #%d %s %s -> 404", n, r.Method, r.URL.Path)
		http.NotFound(w, r)
	}
}

// reply is the decision for one `POST /v1/responses`.
type reply struct {
	kind string
	cmd  string // KindFunctionCall only
}

func (s *Stub) serveResponses(w http.ResponseWriter, r *http.Request, n int) {
	body, err := readBody(r)
	var rep reply
	if err == nil {
		rep, err = decide(body)
	}
	if err != nil {
		s.mu.Lock()
		s.stats.BadRequests++
		s.mu.Unlock()
		s.logf("modelstub: #%d POST /v1/responses -> 400: %v", n, err)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.stats.Responses++
	s.stats.ByKind[rep.kind]++
	if rep.kind == KindFunctionCall {
		s.stats.Commands = append(s.stats.Commands, rep.cmd)
	}
	s.mu.Unlock()
	s.logf("modelstub: #%d POST /v1/responses -> %s", n, rep.kind)

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for _, ev := range events(rep, n) {
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.typ, ev.data); err != nil {
			s.logf("modelstub: #%d write: %v", n, err)
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// readBody reads the request body, undoing a gzip Content-Encoding.
func readBody(r *http.Request) ([]byte, error) {
	var rd io.Reader = io.LimitReader(r.Body, maxBody+1)
	switch enc := strings.ToLower(r.Header.Get("Content-Encoding")); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer zr.Close()
		rd = io.LimitReader(zr, maxBody+1)
	default:
		return nil, fmt.Errorf("unsupported content-encoding %q", enc)
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if len(b) > maxBody {
		return nil, errors.New("body over 32 MiB")
	}
	return b, nil
}

// inputItem is the part of a Responses-API `input` item the stub reads.
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// decide picks the reply for a request body (rules in the package doc).
func decide(body []byte) (reply, error) {
	var req struct {
		Input json.RawMessage `json:"input"`
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
	return decideText(contentText(items[lastUser].Content)), nil
}

// decideText applies rules 2 and 3 to the text of the latest user message.
func decideText(text string) reply {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, RunPrefix); ok {
			if cmd := strings.TrimSpace(rest); cmd != "" {
				return reply{kind: KindFunctionCall, cmd: cmd}
			}
		}
	}
	return reply{kind: KindText}
}

// contentText joins the text parts of a message's `content`, which is
// either a string or a list of {type, text} parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n")
}

// sseEvent is one server-sent event: `event: typ`, `data: data`.
type sseEvent struct {
	typ  string
	data []byte
}

// events builds the stream for a reply; n numbers the ids (resp_n,
// msg_n, call_n) so they are unique per stub and deterministic.
func events(rep reply, n int) []sseEvent {
	respID := fmt.Sprintf("resp_%d", n)
	var out []sseEvent
	add := func(typ string, v map[string]any) {
		v["type"] = typ
		b, err := json.Marshal(v)
		if err != nil {
			panic(err) // only maps of plain values: cannot fail
		}
		out = append(out, sseEvent{typ: typ, data: b})
	}
	add("response.created", map[string]any{"response": map[string]any{"id": respID}})

	switch rep.kind {
	case KindFunctionCall:
		args, err := json.Marshal(map[string]string{
			"cmd":                 rep.cmd,
			"sandbox_permissions": "require_escalated",
			"justification":       Justification,
		})
		if err != nil {
			panic(err)
		}
		item := func(arguments string, status string) map[string]any {
			return map[string]any{
				"type":      "function_call",
				"id":        fmt.Sprintf("fc_%d", n),
				"call_id":   fmt.Sprintf("call_%d", n),
				"name":      ToolName,
				"arguments": arguments,
				"status":    status,
			}
		}
		add("response.output_item.added", map[string]any{"output_index": 0, "item": item("", "in_progress")})
		add("response.output_item.done", map[string]any{"output_index": 0, "item": item(string(args), "completed")})
	default:
		deltas := HelloDeltas
		if rep.kind == KindToolResult {
			deltas = []string{DoneText}
		}
		msgID := fmt.Sprintf("msg_%d", n)
		add("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
			"type": "message", "id": msgID, "role": "assistant", "status": "in_progress", "content": []any{},
		}})
		for _, d := range deltas {
			add("response.output_text.delta", map[string]any{
				"item_id": msgID, "output_index": 0, "content_index": 0, "delta": d,
			})
		}
		add("response.output_item.done", map[string]any{"output_index": 0, "item": map[string]any{
			"type": "message", "id": msgID, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": strings.Join(deltas, ""), "annotations": []any{}}},
		}})
	}
	add("response.completed", map[string]any{"response": map[string]any{
		"id": respID,
		"usage": map[string]any{
			"input_tokens": UsageInput, "output_tokens": UsageOutput, "total_tokens": UsageTotal,
		},
	}})
	return out
}
