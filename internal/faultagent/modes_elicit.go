package main

// The elicitation and withdrawal modes: elicit=<form|url|malformed>,
// elicit-count=<n>, elicit-withdraw=<ms>, permission-withdraw=<ms> (see
// package doc).

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// elicitModes holds the modes elicit, elicit-withdraw and
// permission-withdraw.
type elicitModes struct {
	// elicit: each turn sends elicitation/create of this kind: "form"
	// (requestedSchema strategy enum + count integer, strategy required),
	// "url" (elicitationId fa-elicit-1; an accepted one is followed by
	// elicitation/complete) or "malformed" (form mode without
	// requestedSchema).
	elicit string
	// elicitWithdraw: the elicitation is withdrawn with $/cancel_request
	// this long after it was sent (0: never).
	elicitWithdraw time.Duration
	// permissionWithdraw: the permission=<kind> ask is withdrawn with
	// $/cancel_request this long after it was sent (0: never).
	permissionWithdraw time.Duration
	// extWithdraw: the ext-ask=<method> request is withdrawn with
	// $/cancel_request this long after it was sent (0: never).
	extWithdraw time.Duration
	// elicitCount: the turn sends this many elicitations at once (0: one).
	elicitCount int
}

// parse sets a mode of elicitModes from its value.
func (m *elicitModes) parse(name, val string, hasVal bool) error {
	switch name {
	case "elicit":
		switch val {
		case "form", "url", "malformed":
			m.elicit = val
		default:
			return errors.New("mode elicit needs =form, =url or =malformed")
		}
	case "elicit-count":
		n, err := strconv.Atoi(val)
		if !hasVal || err != nil || n < 1 {
			return errors.New("mode elicit-count needs =<n> ≥ 1")
		}
		m.elicitCount = n
	case "elicit-withdraw", "permission-withdraw", "ext-withdraw":
		n, err := strconv.Atoi(val)
		if !hasVal || err != nil || n <= 0 {
			return fmt.Errorf("mode %s needs =<ms>", name)
		}
		d := time.Duration(n) * time.Millisecond
		switch name {
		case "elicit-withdraw":
			m.elicitWithdraw = d
		case "ext-withdraw":
			m.extWithdraw = d
		default:
			m.permissionWithdraw = d
		}
	default:
		return fmt.Errorf("unknown mode %q", name)
	}
	return nil
}

// elicitSchema is the form mode's requestedSchema.
var elicitSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"strategy": map[string]any{"type": "string", "enum": []string{"conservative", "balanced", "aggressive"}},
		"count":    map[string]any{"type": "integer", "minimum": 1, "maximum": 9},
	},
	"required": []string{"strategy"},
}

// elicitTurn runs the turn's elicitation (mode elicit) and returns the
// chunks to report: first "elicit caps: <clientCapabilities.elicitation
// of initialize, or null>", then "elicit: <action> <content>" or
// "elicit: error <code>".
func (a *agent) elicitTurn(sessionID string) []string {
	a.mu.Lock()
	caps := a.clientElicit
	a.mu.Unlock()
	if len(caps) == 0 {
		caps = json.RawMessage("null")
	}
	out := []string{"elicit caps: " + string(caps)}
	params := map[string]any{"sessionId": sessionID, "mode": "form", "message": "How should I approach this?",
		"requestedSchema": elicitSchema}
	switch a.cfg.elicit {
	case "url":
		params = map[string]any{"sessionId": sessionID, "mode": "url", "message": "Please authorize.",
			"elicitationId": "fa-elicit-1", "url": "https://agent.example.com/connect?elicitationId=fa-elicit-1"}
	case "malformed":
		delete(params, "requestedSchema")
	}
	n := max(a.cfg.elicitCount, 1)
	resps := make([]message, n)
	var wg sync.WaitGroup
	for i := range resps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i] = a.callWithdraw("elicitation/create", params, a.cfg.elicitWithdraw)
		}()
	}
	wg.Wait()
	for _, resp := range resps {
		out = append(out, a.elicitAnswer(resp))
	}
	return out
}

// elicitAnswer is the report of one elicitation's answer, "elicit:
// <action> <content>" or "elicit: error <code>" (an accepted url one is
// followed by elicitation/complete).
func (a *agent) elicitAnswer(resp message) string {
	if resp.Error != nil {
		return fmt.Sprintf("elicit: error %d", resp.Error.Code)
	}
	var r struct {
		Action  string          `json:"action"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(resp.Result, &r)
	if r.Action == "accept" && a.cfg.elicit == "url" {
		p, _ := json.Marshal(map[string]any{"elicitationId": "fa-elicit-1"})
		a.write(message{Method: "elicitation/complete", Params: p})
	}
	if len(r.Content) == 0 {
		r.Content = json.RawMessage("null")
	}
	return fmt.Sprintf("elicit: %s %s", r.Action, r.Content)
}

// callWithdraw is call that, when after > 0, withdraws the request with
// $/cancel_request {requestId} after that long if no answer came, and
// then waits for the answer (the client must still send one, -32800).
func (a *agent) callWithdraw(method string, params any, after time.Duration) message {
	id, ch := a.send(method, params)
	if after <= 0 || id == nil {
		return <-ch
	}
	t := time.NewTimer(after)
	defer t.Stop()
	select {
	case m := <-ch:
		return m
	case <-t.C:
	}
	logf("withdrawing request id=%s", id)
	cp, _ := json.Marshal(map[string]any{"requestId": id})
	a.write(message{Method: "$/cancel_request", Params: cp})
	return <-ch
}
