package modelstub

// Which shell tool a request may call, per agent (docs/agents.md): the
// stub calls the first tool a request declares among the known shell
// tools of its API, with that agent's argument shape; and Qwen Code's
// permission classifier (a side query forced onto its respond_in_schema
// tool) gets a call of that tool whose arguments fill its schema.

import (
	"encoding/json"
	"strings"
)

// Shell tools of the agents this stub serves, beyond the per-API defaults
// (ToolName, AnthropicToolName, GeminiToolName, ChatToolName).
const (
	// CapitalBashToolName is Kimi Code's shell tool ({command, description}),
	// on chat completions and on the Responses API.
	CapitalBashToolName = "Bash"
	// QwenShellToolName is Qwen Code's shell tool ({command, description}),
	// on chat completions (the same name as Gemini CLI's).
	QwenShellToolName = "run_shell_command"
	// ClassifierToolName is the tool Qwen Code forces its side queries
	// onto (its permission classifier in mode auto): the stub answers
	// with one call of it (KindClassifier).
	ClassifierToolName = "respond_in_schema"
	// KindClassifier is the reply kind of a respond_in_schema call.
	KindClassifier = "classifier"
	// ClassifierReason is the string every string property of a
	// respond_in_schema call carries.
	ClassifierReason = "The loopback model does not judge commands."
)

// chatShellTools are the shell tools a chat-completions request may
// declare, in the order the stub prefers them: OpenCode's, Pi's and
// Copilot's `bash`, Kimi's `Bash`, Qwen's `run_shell_command`.
var chatShellTools = []string{ChatToolName, CapitalBashToolName, QwenShellToolName}

// responsesShellTools are the Responses-API shell tools: codex's
// exec_command (its own argument shape: responsesArgs), Copilot's `bash`
// and Kimi's `Bash` ({command, description}).
var responsesShellTools = []string{ToolName, ChatToolName, CapitalBashToolName}

// latestRun picks, of the trailing user messages' texts, the latest that
// asks for a tool call (a `run:` or `ask:` line), else the last one: a
// reminder after the prompt (Kimi Code) does not hide the prompt's
// `run:` line, and an earlier message never overrides a later one.
func latestRun(texts []string) string {
	for i := len(texts) - 1; i >= 0; i-- {
		if _, ask := askLine(texts[i]); ask || decideText(texts[i]).kind == KindFunctionCall {
			return texts[i]
		}
	}
	if len(texts) == 0 {
		return ""
	}
	return texts[len(texts)-1]
}

// pickTool returns the first of known that declared holds, "" if none.
func pickTool(known, declared []string) string {
	for _, k := range known {
		for _, d := range declared {
			if d == k {
				return k
			}
		}
	}
	return ""
}

// classifierArgs fills the JSON schema of a respond_in_schema tool: every
// boolean property false ("shouldBlock": false lets the command run),
// every string property ClassifierReason, numbers 0; other properties are
// left out. A schema that is not an object schema gives {}.
func classifierArgs(schema json.RawMessage) map[string]any {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	out := map[string]any{}
	if json.Unmarshal(schema, &s) != nil {
		return out
	}
	for name, p := range s.Properties {
		t, _ := p.Type.(string)
		switch strings.ToLower(t) {
		case "boolean":
			out[name] = false
		case "string":
			out[name] = ClassifierReason
		case "number", "integer":
			out[name] = 0
		}
	}
	return out
}
