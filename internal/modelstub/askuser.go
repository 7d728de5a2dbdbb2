package modelstub

// The question rule (Messages and Responses APIs): a line `ask:
// <question>` in the last user message, in a request that declares the
// agent's question tool (Claude Code's AskUserQuestion, codex's
// request_user_input), is answered with one call of that tool asking the
// question with the options AskOptions (single choice).
// claude-agent-acp presents that call to a client that declared form
// elicitation as an ACP elicitation/create (docs/agents.md, Claude); the
// tool's result then gets DoneText (rule 1).

import "strings"

const (
	// KindAskUser is a call of the agent's question tool.
	KindAskUser = "ask_user"
	// AskPrefix starts the line of a user message that asks for a
	// question; the question is the rest of the line, trimmed.
	AskPrefix = "ask:"
	// AnthropicAskToolName is Claude Code's question tool.
	AnthropicAskToolName = "AskUserQuestion"
	// ResponsesAskToolName is codex's question tool (offered in its plan
	// collaboration mode).
	ResponsesAskToolName = "request_user_input"
	// AskHeader is the question's header (Claude Code: at most 12
	// characters).
	AskHeader = "Choice"
)

// AskOptions are the labels of the question's options, in order.
var AskOptions = []string{"Yes", "No"}

// askLine returns the question of an `ask:` line of text, if any.
func askLine(text string) (string, bool) {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), AskPrefix); ok {
			if q := strings.TrimSpace(rest); q != "" {
				return q, true
			}
		}
	}
	return "", false
}

// askInput is the AskUserQuestion tool input for question q.
func askInput(q string) map[string]any {
	opts := []any{}
	for _, l := range AskOptions {
		opts = append(opts, map[string]any{"label": l, "description": "Answer " + l})
	}
	return map[string]any{"questions": []any{map[string]any{"question": q, "header": AskHeader, "options": opts, "multiSelect": false}}}
}

// askInputCodex is the request_user_input arguments for question q.
func askInputCodex(q string) map[string]any {
	opts := []any{}
	for _, l := range AskOptions {
		opts = append(opts, map[string]any{"label": l, "description": "Answer " + l})
	}
	return map[string]any{"questions": []any{map[string]any{"id": "q1", "header": AskHeader, "question": q, "options": opts}}}
}
