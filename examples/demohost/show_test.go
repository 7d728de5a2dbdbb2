package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDescribeUpdate: the line (or streamed text) printed for each ACP
// SessionUpdate shape codex-acp 0.16.0 sends
// (internal/modelstub/testdata/codex-transcript.md).
func TestDescribeUpdate(t *testing.T) {
	for _, tc := range []struct{ in, text, line string }{
		{`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello "}}`, "Hello ", ""},
		{`{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"echo hi","kind":"execute","status":"in_progress","content":[]}`,
			"", `tool call    "echo hi"  kind=execute status=in_progress id=call_1`},
		{`{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"completed","rawOutput":{"exit_code":0}}`,
			"", "tool update  id=call_1 status=completed exit code=0"},
		{`{"sessionUpdate":"tool_call_update","toolCallId":"toolu_1","status":"completed","rawOutput":"hello\n"}`,
			"", "tool update  id=toolu_1 status=completed"},
		{`{"sessionUpdate":"usage_update","used":15,"size":258400}`, "", "usage        15 of 258400 tokens of context used"},
		{`{"sessionUpdate":"available_commands_update","availableCommands":[]}`, "", "update       available_commands_update"},
	} {
		text, line := describeUpdate(json.RawMessage(tc.in))
		if text != tc.text || line != tc.line {
			t.Errorf("describeUpdate(%s) = %q, %q; want %q, %q", tc.in, text, line, tc.text, tc.line)
		}
	}
}

// TestDescribeProof: every signal and process of a docs/protocol.md §12 proof
// gets its own line, with how the process exited.
func TestDescribeProof(t *testing.T) {
	var p client.Proof
	in := `{"cleanupId":"c-1","origin":"close","reason":"r","protocolClose":{"outcome":"ok"},
	 "signals":[{"signal":"SIGTERM","target":"tree","at":"2026-11-29T18:38:40.354764495Z"}],
	 "processes":[{"pid":5,"role":"provider","exitCode":null,"signal":"SIGTERM"},{"pid":6,"role":"descendant","exitCode":3}],
	 "containment":"cgroup","verified":{"treeEmpty":true,"method":"m"},"complete":true,"attempts":1,"durationMs":26}`
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(describeProof(p), "\n")
	for _, want := range []string{"protocol close: ok", "signal: SIGTERM to tree at 2026-11-29T18:38:40.354764495Z",
		"process: pid 5 (provider) killed by SIGTERM", "process: pid 6 (descendant) exited with code 3",
		`verified: treeEmpty=true by "m"`, "complete=true attempts=1 durationMs=26"} {
		if !strings.Contains(got, want) {
			t.Errorf("proof lines lack %q:\n%s", want, got)
		}
	}
}

// TestPrinter_StreamsAndScrubs: agent text continues the current line, the
// next event starts a new one, and the secret never reaches the writer.
func TestPrinter_StreamsAndScrubs(t *testing.T) {
	var buf bytes.Buffer
	p := &printer{w: &buf, secret: "sk-demo-xyz"}
	p.stream("says: ", "Hello ")
	p.stream("says: ", "world")
	p.line("key is %s", "sk-demo-xyz")
	want := "says: Hello world\nkey is [REDACTED]\n"
	if buf.String() != want || !p.leaked {
		t.Fatalf("output %q leaked=%v, want %q leaked=true", buf.String(), p.leaked, want)
	}
}

// TestShowEvents: how the demo prints what the client package hands it: a
// turn's updates (streamed text continues its line, other updates get
// their own), the permission audit, an agent's exit and a late proof.
func TestShowEvents(t *testing.T) {
	var buf bytes.Buffer
	code := 3
	d := &demo{out: &printer{w: &buf}}
	d.showUpdate(client.Update{Seq: 5, Update: json.RawMessage(`{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"echo hi","kind":"execute","status":"in_progress"}`)})
	d.showDecision(client.PermissionDecision{ToolCallID: "call_1", Kind: "execute", Decision: "approved",
		Rule: "permissionMode:approve-all", OptionID: "allow_once"})
	d.showUpdate(client.Update{Seq: 9, Update: json.RawMessage(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Done: "}}`)})
	d.showUpdate(client.Update{Seq: 10, Update: json.RawMessage(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ran."}}`)})
	d.showExited(client.Exited{Pid: 7, ExitCode: &code, During: "idle"})
	d.showLateProof(client.Proof{CleanupID: "c-1", Complete: true})
	want := `  [ 5] tool call    "echo hi"  kind=execute status=in_progress id=call_1
  permission   approved for call_1 (kind execute) by rule "permissionMode:approve-all", option allow_once
  [ 9] agent says: Done: ran.
  !! the agent (pid 7) exited on its own during idle: exited with code 3
  late cleanup proof c-1: complete=true
`
	if buf.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", buf.String(), want)
	}
}
