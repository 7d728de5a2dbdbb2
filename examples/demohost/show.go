package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// printer writes the demo's output. It is shared by the main goroutine and
// the client package's callback goroutine, so every write takes mu. Agent text is
// streamed inline (stream); any other line first ends a half-written
// stream line. Every string is scrubbed of the secret before it is written
// and the fact is remembered in leaked.
type printer struct {
	mu      sync.Mutex
	w       io.Writer
	secret  string
	midLine bool
	leaked  bool
}

func (p *printer) scrub(s string) string {
	if p.secret != "" && strings.Contains(s, p.secret) {
		p.leaked = true
		s = strings.ReplaceAll(s, p.secret, "[REDACTED]")
	}
	return s
}

// line prints one line.
func (p *printer) line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.midLine {
		fmt.Fprintln(p.w)
		p.midLine = false
	}
	fmt.Fprintln(p.w, p.scrub(fmt.Sprintf(format, args...)))
}

// header prints a section header.
func (p *printer) header(format string, args ...any) {
	p.line("")
	p.line("== "+format+" ==", args...)
}

// stream appends agent text to the current line, starting it with prefix.
func (p *printer) stream(prefix, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.midLine {
		fmt.Fprint(p.w, prefix)
		p.midLine = true
	}
	text = strings.ReplaceAll(p.scrub(text), "\n", "\n"+strings.Repeat(" ", len(prefix)))
	fmt.Fprint(p.w, text)
}

// acpUpdate holds the fields of an ACP SessionUpdate the demo shows.
type acpUpdate struct {
	SessionUpdate string          `json:"sessionUpdate"`
	Content       json.RawMessage `json:"content"`
	ToolCallID    string          `json:"toolCallId"`
	Title         string          `json:"title"`
	Kind          string          `json:"kind"`
	Status        string          `json:"status"`
	// RawOutput is agent-specific: codex sends {"exit_code": N, …},
	// claude a string.
	RawOutput json.RawMessage `json:"rawOutput"`
	Used      *int64          `json:"used"`
	Size      *int64          `json:"size"`
}

// describeUpdate turns one ACP SessionUpdate into what the demo prints:
// text != "" for agent text to stream inline, else one readable line.
func describeUpdate(raw json.RawMessage) (text, line string) {
	var u acpUpdate
	if err := json.Unmarshal(raw, &u); err != nil {
		return "", "update (unreadable)"
	}
	switch u.SessionUpdate {
	case "agent_message_chunk":
		var c struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(u.Content, &c) == nil && c.Type == "text" {
			return c.Text, ""
		}
		return "", "agent_message_chunk (" + c.Type + ")"
	case "tool_call":
		return "", fmt.Sprintf("tool call    %q  kind=%s status=%s id=%s", u.Title, u.Kind, u.Status, u.ToolCallID)
	case "tool_call_update":
		s := "tool update  id=" + u.ToolCallID
		if u.Status != "" {
			s += " status=" + u.Status
		}
		var out struct {
			ExitCode *int `json:"exit_code"`
		}
		if json.Unmarshal(u.RawOutput, &out) == nil && out.ExitCode != nil {
			s += fmt.Sprintf(" exit code=%d", *out.ExitCode)
		}
		return "", s
	case "usage_update":
		return "", fmt.Sprintf("usage        %s of %s tokens of context used", optInt(u.Used), optInt(u.Size))
	default:
		return "", "update       " + u.SessionUpdate
	}
}

func optInt(p *int64) string {
	if p == nil {
		return "?"
	}
	return fmt.Sprint(*p)
}

// describeProof renders a cleanup proof (docs/protocol.md §12) as readable
// lines.
func describeProof(p client.Proof) []string {
	out := []string{
		fmt.Sprintf("cleanup %s  origin=%s reason=%q containment=%s", p.CleanupID, p.Origin, p.Reason, p.Containment),
	}
	pc := "protocol close: " + string(p.ProtocolClose.Outcome)
	if p.ProtocolClose.Error != "" {
		pc += " (" + p.ProtocolClose.Error + ")"
	}
	out = append(out, pc)
	if len(p.Signals) == 0 {
		out = append(out, "signals: none sent")
	}
	for _, s := range p.Signals {
		l := fmt.Sprintf("signal: %s to %s at %s", s.Signal, s.Target, protocol.FormatTime(s.At.Time))
		if s.Error != "" {
			l += " (error: " + s.Error + ")"
		}
		out = append(out, l)
	}
	for _, pr := range p.Processes {
		out = append(out, fmt.Sprintf("process: pid %d (%s) %s", pr.Pid, pr.Role, howExited(pr.ExitCode, pr.Signal)))
	}
	out = append(out,
		fmt.Sprintf("verified: treeEmpty=%v by %q", p.Verified.TreeEmpty, p.Verified.Method),
		fmt.Sprintf("complete=%v attempts=%d durationMs=%d", p.Complete, p.Attempts, p.DurationMs))
	for _, e := range p.Errors {
		out = append(out, fmt.Sprintf("error: %s: %s", e.Code, e.Message))
	}
	return out
}

func howExited(code *int, signal string) string {
	switch {
	case signal != "":
		return "killed by " + signal
	case code != nil:
		return fmt.Sprintf("exited with code %d", *code)
	default:
		return "gone (its exit status was not collected by the sidecar)"
	}
}
