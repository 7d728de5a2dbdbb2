package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNormal_HandshakeTurnSetModelLoadClose covers the normal mode: the
// initialize/new shapes, one turn, set_model, load replay before the load
// answer, close, and exit 0 on stdin EOF.
func TestNormal_HandshakeTurnSetModelLoadClose(t *testing.T) {
	p := start(t)
	init := decode[struct {
		ProtocolVersion int `json:"protocolVersion"`
		AgentInfo       struct{ Name, Version string }
		AgentCaps       struct {
			LoadSession         bool                       `json:"loadSession"`
			SessionCapabilities map[string]json.RawMessage `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
		AuthMethods []any `json:"authMethods"`
	}](t, p.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, nil))
	if init.ProtocolVersion != 1 || init.AgentInfo.Name != "faultagent" || init.AgentInfo.Version != "0.1.0" ||
		!init.AgentCaps.LoadSession || init.AgentCaps.SessionCapabilities["close"] == nil || init.AuthMethods == nil {
		t.Fatalf("initialize: %+v", init)
	}
	type models struct {
		CurrentModelID  string `json:"currentModelId"`
		AvailableModels []struct {
			ModelID string `json:"modelId"`
		} `json:"availableModels"`
	}
	nr := decode[struct {
		SessionID string `json:"sessionId"`
		Models    models `json:"models"`
		Modes     struct {
			CurrentModeID string `json:"currentModeId"`
		} `json:"modes"`
	}](t, p.call("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}, nil))
	if !strings.HasPrefix(nr.SessionID, "fa-") || nr.Models.CurrentModelID != "fa-model" ||
		len(nr.Models.AvailableModels) != 2 || nr.Modes.CurrentModeID == "" {
		t.Fatalf("session/new: %+v", nr)
	}
	sid := nr.SessionID

	pr := decode[promptResult](t, p.call("session/prompt", promptText(sid, "hi"), nil))
	if pr.StopReason != "end_turn" || pr.Usage.InputTokens != 10 || pr.Usage.OutputTokens != 5 || pr.Usage.TotalTokens != 15 {
		t.Fatalf("prompt result %+v", pr)
	}
	ups := p.updates(0)
	if len(ups) != 2 || ups[0].Update.SessionUpdate != "agent_message_chunk" || ups[0].Update.Content.Text != helloText ||
		ups[1].Update.SessionUpdate != "usage_update" || ups[1].Update.Used != 15 || ups[0].SessionID != sid {
		t.Fatalf("turn updates %+v", ups)
	}

	if m := p.call("session/set_model", map[string]any{"sessionId": sid, "modelId": "fa-large"}, nil); m.Error != nil {
		t.Fatalf("set_model: %+v", *m.Error)
	}
	if m := p.call("session/set_model", map[string]any{"sessionId": sid, "modelId": "nope"}, nil); m.Error == nil {
		t.Fatalf("set_model to an unknown model succeeded")
	}

	mark := len(p.notes)
	lr := decode[struct {
		Models models `json:"models"`
	}](t, p.call("session/load", map[string]any{"sessionId": sid, "cwd": t.TempDir(), "mcpServers": []any{}}, nil))
	if lr.Models.CurrentModelID != "fa-large" {
		t.Fatalf("load models %+v", lr.Models)
	}
	var replay []string
	for _, u := range p.updates(mark) {
		replay = append(replay, u.Update.SessionUpdate+":"+u.Update.Content.Text)
	}
	want := []string{"user_message_chunk:hi", "agent_message_chunk:" + helloText, "usage_update:"}
	if strings.Join(replay, "|") != strings.Join(want, "|") {
		t.Fatalf("replay %q, want %q", replay, want)
	}

	cfg := decode[struct {
		ConfigOptions []struct{ CurrentValue string } `json:"configOptions"`
	}](t, p.call("session/set_config_option", map[string]any{"sessionId": sid, "configId": "model", "value": "fa-model"}, nil))
	if len(cfg.ConfigOptions) != 1 || cfg.ConfigOptions[0].CurrentValue != "fa-model" {
		t.Fatalf("set_config_option %+v", cfg)
	}
	if m := p.call("session/close", map[string]any{"sessionId": sid}, nil); m.Error != nil || string(m.Result) != "{}" {
		t.Fatalf("close: %+v %s", m.Error, m.Result)
	}
	p.stdin.Close()
	if err := p.wait(); err != nil {
		t.Fatalf("exit after stdin EOF: %v", err)
	}
	for _, meth := range []string{"initialize", "session/new", "session/prompt", "session/load", "session/close"} {
		if !strings.Contains(p.stderrText(), "recv "+meth+" ") {
			t.Errorf("stderr lacks a line for %s", meth)
		}
	}
}

// TestFlood_DeliversEveryUpdateInOrder: flood=N sends N chunks in one turn.
func TestFlood_DeliversEveryUpdateInOrder(t *testing.T) {
	const n = 20000
	p := start(t, "--mode", "flood="+strconv.Itoa(n))
	sid := handshake(t, p)
	pr := decode[promptResult](t, p.call("session/prompt", promptText(sid, "go"), nil))
	if pr.StopReason != "end_turn" {
		t.Fatalf("stop %q", pr.StopReason)
	}
	ups := p.updates(0)
	if len(ups) != n+2 {
		t.Fatalf("got %d updates, want %d", len(ups), n+2)
	}
	for i := 0; i < n; i++ {
		if got := ups[i+1].Update.Content.Text; got != fmt.Sprintf("flood %d;", i) {
			t.Fatalf("update %d = %q", i+1, got)
		}
	}
}

// TestLongLine_NoLineLengthLimitEitherWay: a 3 MiB chunk out, and a
// 1 MiB+7 prompt in (replayed by session/load to prove it was read whole).
func TestLongLine_NoLineLengthLimitEitherWay(t *testing.T) {
	const out, in = 3 << 20, 1<<20 + 7
	p := start(t, "--mode", "long-line="+strconv.Itoa(out))
	sid := handshake(t, p)
	big := strings.Repeat("y", in)
	if pr := decode[promptResult](t, p.call("session/prompt", promptText(sid, big), nil)); pr.StopReason != "end_turn" {
		t.Fatalf("stop %q", pr.StopReason)
	}
	ups := p.updates(0)
	if len(ups) != 3 || len(ups[1].Update.Content.Text) != out || strings.Trim(ups[1].Update.Content.Text, "x") != "" {
		t.Fatalf("updates: %d, long chunk %d bytes", len(ups), len(ups[1].Update.Content.Text))
	}
	mark := len(p.notes)
	p.call("session/load", map[string]any{"sessionId": sid, "cwd": "/", "mcpServers": []any{}}, nil)
	if ups := p.updates(mark); len(ups) == 0 || ups[0].Update.Content.Text != big {
		t.Fatalf("the big prompt was not read whole")
	}
}

// TestSlowTurn_CancelEndsTurnCancelled: session/cancel ends a slow turn
// (10 min) with stopReason cancelled.
func TestSlowTurn_CancelEndsTurnCancelled(t *testing.T) {
	p := start(t, "--mode", "slow-turn=600000")
	sid := handshake(t, p)
	id := p.request("session/prompt", promptText(sid, "wait"))
	// The first chunk proves the turn is running before we cancel it.
	if m := p.next(); m.Method != "session/update" {
		t.Fatalf("first message %+v", m)
	}
	b, _ := json.Marshal(map[string]any{"sessionId": sid})
	p.send(message{Method: "session/cancel", Params: b})
	if pr := decode[promptResult](t, p.await(id, nil)); pr.StopReason != "cancelled" {
		t.Fatalf("stop %q", pr.StopReason)
	}
}

// TestPermission_ReportsSelectedOption: permission=edit asks with four
// options and reports the client's choice.
func TestPermission_ReportsSelectedOption(t *testing.T) {
	p := start(t, "--mode", "permission=edit,garbage-stdout")
	sid := handshake(t, p)
	var kinds []string
	var toolKind string
	pr := decode[promptResult](t, p.call("session/prompt", promptText(sid, "edit"), func(m message) any {
		var req struct {
			ToolCall struct{ ToolCallID, Title, Kind string }
			Options  []struct{ OptionID, Kind string }
		}
		_ = json.Unmarshal(m.Params, &req)
		toolKind = req.ToolCall.Kind
		for _, o := range req.Options {
			kinds = append(kinds, o.Kind)
		}
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "reject-once"}}
	}))
	if pr.StopReason != "end_turn" || toolKind != "edit" ||
		strings.Join(kinds, ",") != "allow_once,allow_always,reject_once,reject_always" {
		t.Fatalf("stop %q kind %q options %v", pr.StopReason, toolKind, kinds)
	}
	ups := p.updates(0)
	if ups[1].Update.Content.Text != "permission: selected reject-once" {
		t.Fatalf("updates %+v", ups)
	}
	p.mu.Lock()
	g := len(p.garbage)
	p.mu.Unlock()
	if g < 5 {
		t.Fatalf("garbage-stdout: %d non-JSON lines", g)
	}
}

// TestCrashMidTurn_ExitsThreeAfterFirstUpdate.
func TestCrashMidTurn_ExitsThreeAfterFirstUpdate(t *testing.T) {
	p := start(t, "--mode", "crash-mid-turn")
	sid := handshake(t, p)
	p.request("session/prompt", promptText(sid, "x"))
	if m := p.next(); m.Method != "session/update" {
		t.Fatalf("first message %+v", m)
	}
	err := p.wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v", err)
	}
}

// TestHangInitialize_LaterRequestsStillAnswered: initialize never gets a
// response even though the request after it does.
func TestHangInitialize_LaterRequestsStillAnswered(t *testing.T) {
	p := start(t, "--mode", "hang-initialize")
	p.request("initialize", map[string]any{"protocolVersion": 1})
	id := p.request("authenticate", map[string]any{"methodId": "x"})
	if m := p.next(); !bytes.Equal(m.ID, id) {
		t.Fatalf("got %+v, want the authenticate response", m)
	}
	p.stdin.Close()
	if err := p.wait(); err != nil {
		t.Fatal(err)
	}
	for m := range p.msgs {
		t.Fatalf("unexpected message after authenticate: %+v", m)
	}
}

// TestGrandchild_SurvivesGroupKillInOwnSession: the grandchild mode leaves
// a setsid process that a process-group kill does not reach.
func TestGrandchild_SurvivesGroupKillInOwnSession(t *testing.T) {
	p := start(t, "--mode", "grandchild,ignore-term")
	handshake(t, p)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.wait()
	left := markedPIDs(p.marker)
	if len(left) != 1 {
		t.Fatalf("marked processes after group kill: %v, want the grandchild", left)
	}
	sid, err := unix.Getsid(left[0])
	if err != nil || sid != left[0] {
		t.Fatalf("grandchild %d sid %d (%v), want its own session", left[0], sid, err)
	}
	// SIGTERM is ignored (SigIgn bit 15 in /proc/pid/status), so the kernel
	// drops it at send time.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", left[0]))
	if err != nil {
		t.Fatal(err)
	}
	var sigIgn uint64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			sigIgn, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	if sigIgn&(1<<(uint(syscall.SIGTERM)-1)) == 0 {
		t.Fatalf("grandchild does not ignore SIGTERM (SigIgn %x)", sigIgn)
	}
	// cleanup (p.kill) SIGKILLs it by pid and asserts the scan is empty.
}

// TestHangModes_OnlyTheHungRequestGoesUnanswered: hang-new and hang-close
// leave exactly that request without a response; later ones are answered.
func TestHangModes_OnlyTheHungRequestGoesUnanswered(t *testing.T) {
	for _, tc := range []struct{ mode, method string }{
		{"hang-new", "session/new"},
		{"hang-close", "session/close"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			p := start(t, "--mode", tc.mode)
			p.call("initialize", map[string]any{"protocolVersion": 1}, nil)
			p.request(tc.method, map[string]any{"sessionId": "fa-x", "cwd": "/", "mcpServers": []any{}})
			id := p.request("authenticate", map[string]any{"methodId": "x"})
			if m := p.next(); !bytes.Equal(m.ID, id) {
				t.Fatalf("got %+v, want the authenticate response", m)
			}
			p.stdin.Close()
			if err := p.wait(); err != nil {
				t.Fatal(err)
			}
			for m := range p.msgs {
				t.Fatalf("unexpected message: %+v", m)
			}
		})
	}
}

// TestSessionVariants: no-session-id, close-unsupported and late-new.
func TestSessionVariants(t *testing.T) {
	t.Run("no-session-id", func(t *testing.T) {
		p := start(t, "--mode", "no-session-id")
		p.call("initialize", map[string]any{"protocolVersion": 1}, nil)
		res := decode[map[string]json.RawMessage](t, p.call("session/new", map[string]any{"cwd": "/", "mcpServers": []any{}}, nil))
		if _, ok := res["sessionId"]; ok || res["models"] == nil {
			t.Fatalf("session/new result %v", res)
		}
	})
	t.Run("close-unsupported", func(t *testing.T) {
		p := start(t, "--mode", "close-unsupported")
		init := decode[struct {
			AgentCapabilities struct {
				SessionCapabilities map[string]json.RawMessage `json:"sessionCapabilities"`
			} `json:"agentCapabilities"`
		}](t, p.call("initialize", map[string]any{"protocolVersion": 1}, nil))
		if _, ok := init.AgentCapabilities.SessionCapabilities["close"]; ok {
			t.Fatalf("close advertised")
		}
		sid := decode[struct{ SessionID string }](t, p.call("session/new", map[string]any{"cwd": "/", "mcpServers": []any{}}, nil)).SessionID
		if m := p.call("session/close", map[string]any{"sessionId": sid}, nil); m.Error == nil || m.Error.Code != codeMethodNotFound {
			t.Fatalf("close: %+v", m)
		}
	})
	t.Run("late-new", func(t *testing.T) {
		p := start(t, "--mode", "late-new=50")
		handshake(t, p)
	})
}

// TestStateDir_LoadInFreshProcessReplaysHistory: with --state-dir a second
// process can session/load a session the first one ran.
func TestStateDir_LoadInFreshProcessReplaysHistory(t *testing.T) {
	dir := t.TempDir()
	p := start(t, "--state-dir", dir)
	sid := handshake(t, p)
	p.call("session/prompt", promptText(sid, "remember me"), nil)
	p.stdin.Close()
	if err := p.wait(); err != nil {
		t.Fatal(err)
	}
	q := start(t, "--state-dir", dir)
	q.call("initialize", map[string]any{"protocolVersion": 1}, nil)
	if m := q.call("session/load", map[string]any{"sessionId": sid, "cwd": "/", "mcpServers": []any{}}, nil); m.Error != nil {
		t.Fatalf("load: %+v", *m.Error)
	}
	ups := q.updates(0)
	if len(ups) != 3 || ups[0].Update.Content.Text != "remember me" || ups[1].Update.Content.Text != helloText {
		t.Fatalf("replay %+v", ups)
	}
	if m := q.call("session/load", map[string]any{"sessionId": "fa-unknown", "cwd": "/", "mcpServers": []any{}}, nil); m.Error == nil {
		t.Fatalf("load of an unknown session succeeded")
	}
}
