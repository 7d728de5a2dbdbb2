// Package modelstub is a deterministic loopback stand-in for four model
// APIs, good enough to drive real AI coding agents offline
// (docs/agents.md):
//
//   - the OpenAI Responses API (codex, Copilot, Kimi Code; responses.go),
//   - the Anthropic Messages API (Claude Code; anthropic.go),
//   - the Gemini API (Gemini CLI; gemini.go),
//   - OpenAI chat completions (OpenCode, Pi, Qwen Code; chat.go).
//
// One Stub serves them all on one http.Handler with one set of Stats:
//
//	POST /v1/responses                                SSE `event:`+`data:`
//	POST /v1/messages                                 SSE `event:`+`data:`
//	                                                  (one JSON Message if "stream" is not true)
//	POST /v1/messages/count_tokens                    {"input_tokens":10}
//	POST /v1beta/models/{model}:streamGenerateContent SSE `data:` only
//	POST /v1beta/models/{model}:generateContent       fixed model-router JSON
//	POST /v1beta/models/{model}:countTokens           {"totalTokens":10}
//	POST /v1/chat/completions                         SSE `data:` ending in `data: [DONE]`
//	                                                  (one JSON chat.completion if "stream" is not true)
//	GET  /stats                                       Stats as JSON
//
// Query strings are ignored. Every other path or method is a 404 with a log
// line; a body that is not the JSON the endpoint expects is a 400.
//
// The reply to a model turn is chosen from the request body alone, by the
// same rules for every API:
//
//  1. a tool result after the last user message -> the text DoneText;
//  2. else the last user message has a line `run: <shell command>` (see
//     RunPrefix) and the request may call the API's shell tool -> exactly
//     one call of that tool with that command;
//  3. else -> the text HelloText, streamed as the deltas HelloDeltas.
//
// Per API, "tool result" and "shell tool" mean (the user message is the
// last one with role "user"; Gemini contents may omit the role):
//
//	API        tool result                             shell tool (must be declared)
//	responses  function_call_output item after it      ToolName (always allowed), or
//	                                                   ChatToolName / CapitalBashToolName
//	                                                   when declared without ToolName
//	anthropic  tool_result block in the last message   AnthropicToolName in "tools"
//	gemini     functionResponse part in last content   GeminiToolName in functionDeclarations
//	chat       last message has role "tool"            ChatToolName, CapitalBashToolName or
//	                                                   QwenShellToolName in "tools"
//
// On chat completions and the Responses API "the last user message" is
// the latest of the trailing user messages that has a `run:` (or `ask:`)
// line, else the last one (Kimi Code follows its prompt with a
// `<system-reminder>` user message). A chat request whose only
// tool is ClassifierToolName (Qwen Code's permission classifier) gets one
// call of it filling its schema (shelltools.go).
// Except on the Responses API, requests that do not declare the shell tool
// (title and other side requests of the agents) always get text. Every
// reply reports usage UsageInput/UsageOutput/UsageTotal tokens (10/5/15)
// in the API's own shape. A `run:` line is the only control (and, on the
// Messages API, an `ask:` line: askuser.go); there are no delays or
// faults.
//
// The stub never logs request headers (they carry the API key), query
// strings (Gemini may carry `key=`) nor request bodies (they carry the
// user's prompt and environment).
package modelstub

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
)

// Texts and names the stub uses in its replies; tests match on them.
const (
	// HelloText is the assistant text of a plain turn (rule 3), sent as
	// the deltas in HelloDeltas.
	HelloText = "Hello from the loopback model."
	// DoneText is the assistant text after a tool result (rule 1), sent as
	// one delta.
	DoneText = "Done: the command ran."
	// ToolName is the function the stub calls for `run:` lines on the
	// Responses API (rule 2); codex refuses `shell` as unsupported
	// (docs/agents.md, Codex).
	ToolName = "exec_command"
	// AnthropicToolName is the tool the stub calls on the Messages API:
	// Claude Code's shell tool.
	AnthropicToolName = "Bash"
	// GeminiToolName is the function the stub calls on the Gemini API:
	// Gemini CLI's shell tool.
	GeminiToolName = "run_shell_command"
	// ChatToolName is the function the stub calls on chat completions:
	// OpenCode's shell tool.
	ChatToolName = "bash"
	// Justification is the "justification" argument of the Responses tool
	// call.
	Justification = "The user asked to run this command."
	// CommandDescription is the "description" argument of the Anthropic,
	// Gemini and chat tool calls, whose arguments are
	// {"command": <cmd>, "description": CommandDescription}.
	CommandDescription = "Run the requested command"
	// RunPrefix starts the line of a user message that asks for a tool
	// call; the command is the rest of the line, trimmed, and must not be
	// empty. Lines are trimmed before the prefix is matched.
	RunPrefix = "run:"

	// UsageInput, UsageOutput and UsageTotal are the token counts every
	// reply reports; count-tokens endpoints answer UsageInput.
	UsageInput  = 10
	UsageOutput = 5
	UsageTotal  = 15

	// maxBody bounds a request body (bytes); agents send the whole
	// conversation plus tool schemas, a few hundred KiB at most.
	maxBody = 32 << 20
)

// HelloDeltas is HelloText cut into the text deltas of a plain turn, in
// order.
var HelloDeltas = []string{"Hello ", "from the loopback ", "model."}

// Reply kinds, as counted in Stats.ByKind and logged per request.
const (
	// KindText is a HelloText reply (rule 3).
	KindText = "text"
	// KindFunctionCall is a shell tool call (rule 2), whatever the API
	// calls it (function_call, tool_use, functionCall, tool_calls).
	KindFunctionCall = "function_call"
	// KindToolResult is a DoneText reply to a tool result (rule 1).
	KindToolResult = "tool_result"
)

// Not shared: alike only in form to protocol's const blocks and structs (the stub's own names and counters).

// API names, the keys of Stats.ByAPI.
const (
	// APIResponses is `POST /v1/responses` (responses.go).
	APIResponses = "responses"
	// APIAnthropic is `POST /v1/messages` (anthropic.go).
	APIAnthropic = "anthropic"
	// APIGemini is `POST /v1beta/models/{model}:streamGenerateContent`
	// (gemini.go).
	APIGemini = "gemini"
	// APIChat is `POST /v1/chat/completions` (chat.go).
	APIChat = "chat"
)

// Stats is the JSON body of `GET /stats`: counters since the stub started.
type Stats struct {
	// Requests counts every HTTP request, any path or method.
	Requests int `json:"requests"`
	// Responses counts model turns answered by the rules, of any API,
	// streamed or (without "stream":true) sent as one JSON body. It equals the
	// sum of ByKind and of ByAPI.
	Responses int `json:"responses"`
	// ByKind counts those replies by kind (KindText, KindFunctionCall,
	// KindToolResult).
	ByKind map[string]int `json:"byKind"`
	// ByAPI counts those replies by API (APIResponses, APIAnthropic,
	// APIGemini, APIChat).
	ByAPI map[string]int `json:"byAPI"`
	// Commands lists, in order, the command of every tool call sent.
	Commands []string `json:"commands"`
	// Auxiliary counts the fixed answers outside the rules: token counts
	// and Gemini's non-streaming generateContent.
	Auxiliary int `json:"auxiliary"`
	// NotFound counts requests answered 404.
	NotFound int `json:"notFound"`
	// BadRequests counts bodies that could not be read or were not the
	// JSON the endpoint expects (answered 400).
	BadRequests int `json:"badRequests"`
}

// Stub is the http.Handler of the loopback model. The zero value is not
// usable; build one with New. A Stub is safe for concurrent use.
type Stub struct {
	logf func(format string, args ...any)

	mu    sync.Mutex
	stats Stats
	// bodies are the bodies of the last maxKeptBodies model-turn
	// requests, kept in memory (never logged) for TurnsContaining.
	bodies [][]byte
}

// maxKeptBodies bounds the model-turn request bodies a Stub keeps.
const maxKeptBodies = 256

// TurnsContaining counts the kept model-turn requests (the last 256)
// whose body holds every one of texts, as the bytes the agent sent: a
// test asks whether an agent sent its model what an earlier turn said
// (docs/protocol.md §24: a revived agent remembers). Bodies are never
// logged or served.
func (s *Stub) TurnsContaining(texts ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, b := range s.bodies {
		all := true
		for _, t := range texts {
			if !strings.Contains(string(b), t) {
				all = false
				break
			}
		}
		if all {
			n++
		}
	}
	return n
}

// New returns a Stub that logs one line per request through logf (nil means
// no logging). Log lines hold method, path, reply kind and ids only.
func New(logf func(format string, args ...any)) *Stub {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Stub{logf: logf, stats: Stats{ByKind: map[string]int{}, ByAPI: map[string]int{}, Commands: []string{}}}
}

// Stats returns a copy of the counters (the same data as `GET /stats`).
func (s *Stub) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.stats
	out.ByKind = copyCounts(s.stats.ByKind)
	out.ByAPI = copyCounts(s.stats.ByAPI)
	out.Commands = append([]string{}, s.stats.Commands...)
	return out
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ServeHTTP implements http.Handler for the endpoints of the package doc;
// anything else is a 404.
func (s *Stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.stats.Requests++
	n := s.stats.Requests
	s.mu.Unlock()

	post := r.Method == http.MethodPost
	model, action, isGemini := geminiRoute(r.URL.Path)
	switch {
	case post && r.URL.Path == "/v1/responses":
		s.serveResponses(w, r, n)
	case post && r.URL.Path == "/v1/messages":
		s.serveAnthropic(w, r, n)
	case post && r.URL.Path == "/v1/messages/count_tokens":
		s.serveAux(w, r, n, map[string]int{"input_tokens": UsageInput})
	case post && isGemini:
		s.serveGemini(w, r, n, model, action)
	case post && r.URL.Path == "/v1/chat/completions":
		s.serveChat(w, r, n)
	case r.Method == http.MethodGet && r.URL.Path == "/stats":
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

// reply is the decision for one model turn.
type reply struct {
	kind string
	cmd  string // KindFunctionCall only
	// tool is the shell tool called (KindFunctionCall) when the API has
	// more than one (shelltools.go); "" is the API's default.
	tool string
	// args are a KindClassifier call's arguments.
	args map[string]any
}

// textOnly turns a tool call into a plain text reply unless the request
// may call the shell tool (toolAllowed).
func (rep reply) textOnly(toolAllowed bool) reply {
	if rep.kind == KindFunctionCall && !toolAllowed {
		return reply{kind: KindText}
	}
	return rep
}

// deltas is the text of a text or tool-result reply, as stream deltas.
func (rep reply) deltas() []string {
	if rep.kind == KindToolResult {
		return []string{DoneText}
	}
	return HelloDeltas
}

// turn reads the body of a rule-driven request and decides it with decide
// (which reports a body that is not the expected JSON as an error). On
// success it counts and logs the reply and returns it; on failure it has
// already answered 400 and returns false.
func (s *Stub) turn(w http.ResponseWriter, r *http.Request, n int, api string, decide func([]byte) (reply, error)) (reply, bool) {
	body, err := readBody(r)
	var rep reply
	if err == nil {
		rep, err = decide(body)
	}
	if err != nil {
		s.badRequest(w, r, n, err)
		return reply{}, false
	}
	s.mu.Lock()
	if len(s.bodies) == maxKeptBodies {
		s.bodies = append(s.bodies[:0], s.bodies[1:]...)
	}
	s.bodies = append(s.bodies, body)
	s.stats.Responses++
	s.stats.ByKind[rep.kind]++
	s.stats.ByAPI[api]++
	if rep.kind == KindFunctionCall {
		s.stats.Commands = append(s.stats.Commands, rep.cmd)
	}
	s.mu.Unlock()
	s.logf("modelstub: #%d %s %s -> %s", n, r.Method, r.URL.Path, rep.kind)
	return rep, true
}

// serveAux answers a fixed JSON value v to any JSON body (token counts,
// Gemini's router call), counted in Stats.Auxiliary.
func (s *Stub) serveAux(w http.ResponseWriter, r *http.Request, n int, v any) {
	body, err := readBody(r)
	if err == nil && !json.Valid(body) {
		err = errors.New("body is not JSON")
	}
	if err != nil {
		s.badRequest(w, r, n, err)
		return
	}
	s.mu.Lock()
	s.stats.Auxiliary++
	s.mu.Unlock()
	s.logf("modelstub: #%d %s %s -> auxiliary", n, r.Method, r.URL.Path)
	s.writeJSON(w, n, v)
}

func (s *Stub) badRequest(w http.ResponseWriter, r *http.Request, n int, err error) {
	s.mu.Lock()
	s.stats.BadRequests++
	s.mu.Unlock()
	s.logf("modelstub: #%d %s %s -> 400: %v", n, r.Method, r.URL.Path, err)
	http.Error(w, "bad request", http.StatusBadRequest)
}

// decideText applies rules 2 and 3 to the text of the latest user message:
// the first line that starts with RunPrefix (after trimming) and has a
// non-empty command asks for a tool call.
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
// either a string or a list of {type, text} parts (parts without text,
// such as tool results or images, add empty lines).
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
