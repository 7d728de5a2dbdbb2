package main

// A prompt turn: its updates (per the modes), the permission requests it
// makes, and its answer.

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// sendUpdate writes one session/update notification; update is the
// `update` object.
func (a *agent) sendUpdate(sessionID string, update json.RawMessage) {
	p, _ := json.Marshal(map[string]any{"sessionId": sessionID, "update": update})
	a.write(message{Method: "session/update", Params: p})
}

func chunk(kind, text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"sessionUpdate": kind,
		"content":       map[string]any{"type": "text", "text": text},
	})
	return b
}

func (a *agent) prompt(m message) {
	s, ok := a.sessionOf(m)
	if !ok {
		return
	}
	var p struct {
		Prompt []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
	}
	_ = json.Unmarshal(m.Params, &p)
	var userText strings.Builder
	for _, b := range p.Prompt {
		userText.WriteString(b.Text)
	}
	cancel := make(chan struct{})
	a.mu.Lock()
	if s.cancel != nil {
		a.mu.Unlock()
		a.fail(m.ID, codeInvalidParams, "a turn is already running")
		return
	}
	s.cancel = cancel
	s.Turns++
	turns := s.Turns
	recall := recallText(s.History)
	s.History = append(s.History, chunk("user_message_chunk", userText.String()))
	a.mu.Unlock()

	first := true
	emit := func(u json.RawMessage) {
		a.mu.Lock()
		s.History = append(s.History, u)
		a.mu.Unlock()
		a.sendUpdate(s.ID, u)
		if first && a.cfg.crashMidTurn {
			logf("crash-mid-turn: exit 3")
			os.Exit(3)
		}
		if first && a.cfg.muteMidTurn {
			logf("mute-mid-turn: closing stdout, blocking")
			os.Stdout.Close()
			select {}
		}
		first = false
	}
	cancelled := func() bool {
		select {
		case <-cancel:
			return true
		default:
			return false
		}
	}

	double := a.doubleAnswer(m.ID, emit)
	emit(chunk("agent_message_chunk", helloText))
	if a.drift(s, userText.String(), emit) && !cancelled() { // modes_controls.go
		wait := a.cfg.slowTurn
		if wait == 0 {
			wait = 10 * time.Second
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-cancel:
			t.Stop()
		}
	}
	receipt := a.receiptVariant(userText.String())
	if receipt != "" && receipt != "late" {
		a.sendReceipt(s.ID, receipt)
	}
	if a.cfg.recall {
		emit(chunk("agent_message_chunk", recall))
	}
	a.turnAttacks(s.ID, emit) // modes_attack.go
	if a.cfg.permissionKind != "" && !cancelled() {
		emit(chunk("agent_message_chunk", a.askPermission(s.ID)))
	}
	if a.cfg.extAsk != "" && !cancelled() {
		emit(chunk("agent_message_chunk", a.extAskTurn(s.ID))) // modes_ext.go
	}
	if a.cfg.elicit != "" && !cancelled() {
		for _, c := range a.elicitTurn(s.ID) {
			emit(chunk("agent_message_chunk", c))
		}
	}
	if a.cfg.permissionTitle != "" && !cancelled() {
		emit(chunk("agent_message_chunk", a.askTitledPermission(s.ID)))
	}
	if a.cfg.turnForkBomb > 0 && !cancelled() {
		emit(chunk("agent_message_chunk", runForkBomb(a.cfg.turnForkBomb)))
	}
	if a.cfg.probe {
		for _, r := range runProbes(userText.String()) {
			emit(chunk("agent_message_chunk", r))
		}
	}
	if a.cfg.turnHogMiB > 0 && !cancelled() {
		emit(chunk("agent_message_chunk", runTurnHog(a.cfg.turnHogMiB)))
	}
	for i := 0; i < a.cfg.flood && !cancelled(); i++ {
		emit(chunk("agent_message_chunk", fmt.Sprintf("flood %d;", i)))
	}
	a.stream(emit, cancel)
	if a.cfg.longLine > 0 && !cancelled() {
		emit(chunk("agent_message_chunk", strings.Repeat("x", a.cfg.longLine)))
	}
	if a.cfg.slowTurn > 0 {
		t := time.NewTimer(a.cfg.slowTurn)
		select {
		case <-t.C:
		case <-cancel:
			t.Stop()
		}
	}
	emit(a.withUsageGrowth(a.withSeedCost(a.usageUpdate(), turns), turns))

	stop := "end_turn"
	if double {
		stop = "max_tokens"
	}
	if cancelled() {
		stop = "cancelled"
	}
	a.mu.Lock()
	s.cancel = nil
	a.mu.Unlock()
	a.persist(s)
	a.reply(m.ID, map[string]any{
		"stopReason": stop,
		"usage":      map[string]any{"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
	})
	if receipt == "late" {
		// Well after the answer: the turn has ended at the client.
		time.Sleep(300 * time.Millisecond)
		a.sendReceipt(s.ID, receipt)
	}
}

// askPermission sends session/request_permission and returns the chunk
// text "permission: <outcome> <optionId>" (optionId empty unless selected).
func (a *agent) askPermission(sessionID string) string {
	toolCall := map[string]any{"toolCallId": "fa-call-1", "title": "faultagent tool (" + a.cfg.permissionKind + ")",
		"kind": a.cfg.permissionKind, "status": "pending"}
	return a.requestPermission(sessionID, toolCall, "allow_once", "allow_always", "reject_once", "reject_always")
}

// requestPermission sends session/request_permission for toolCall with one
// option per ACP option kind (optionId = the kind with '-' for '_') and
// returns the chunk text "permission: <outcome> <optionId>".
func (a *agent) requestPermission(sessionID string, toolCall map[string]any, kinds ...string) string {
	names := map[string]string{"allow_once": "Allow once", "allow_always": "Allow always",
		"reject_once": "Reject once", "reject_always": "Reject always"}
	options := []any{}
	for _, k := range kinds {
		options = append(options, map[string]any{"optionId": strings.ReplaceAll(k, "_", "-"), "name": names[k], "kind": k})
	}
	params := map[string]any{"sessionId": sessionID, "toolCall": toolCall, "options": options}
	resp := a.callWithdraw("session/request_permission", params, a.cfg.permissionWithdraw)
	if resp.Error != nil {
		return fmt.Sprintf("permission: error %d", resp.Error.Code)
	}
	outcome, optionID := permissionOutcome(resp)
	return strings.TrimSpace(fmt.Sprintf("permission: %s %s", outcome, optionID))
}

// permissionOutcome is the outcome and optionId of a successful
// session/request_permission answer (empty where absent).
func permissionOutcome(resp message) (outcome, optionID string) {
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	_ = json.Unmarshal(resp.Result, &r)
	return r.Outcome.Outcome, r.Outcome.OptionID
}

// withMember is update (a JSON object) with its member key set to val,
// or update unchanged when it is not an object: the usage_update changes
// of the modes (withUsageGrowth, withSeedCost).
func withMember(update json.RawMessage, key string, val any) json.RawMessage {
	var u map[string]any
	if json.Unmarshal(update, &u) != nil {
		return update
	}
	u[key] = val
	b, _ := json.Marshal(u)
	return b
}

// recallText is the recall mode's chunk for a session whose history is h:
// the text of its user_message_chunks, in order.
func recallText(h []json.RawMessage) string {
	var prompts []string
	for _, u := range h {
		var c struct {
			Kind    string `json:"sessionUpdate"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(u, &c) == nil && c.Kind == "user_message_chunk" {
			prompts = append(prompts, c.Content.Text)
		}
	}
	return fmt.Sprintf("recall: %d earlier prompts: %s", len(prompts), strings.Join(prompts, "|"))
}
