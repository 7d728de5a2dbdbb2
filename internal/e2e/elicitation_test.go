package e2e

// Elicitation (docs/protocol.md §22): the fault agent's elicit=<kind>
// mode sends one ACP elicitation/create per turn and reports what it was
// offered at initialize ("elicit caps: …") and answered ("elicit: …").

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestElicitation_FormAnsweredAcceptDeclineCancel: a host that declared
// both modes gets the agent's form elicitation verbatim as
// session/elicitation; its accept (with content), decline and cancel
// reach the agent; the agent was offered exactly {form, url}; each outcome
// is audited (rule host) and journaled.
func TestElicitation_FormAnsweredAcceptDeclineCancel(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	answers := map[string]any{
		"accept":  map[string]any{"action": "accept", "content": map[string]any{"strategy": "balanced", "count": 3}},
		"decline": map[string]any{"action": "decline"},
		"cancel":  map[string]any{"action": "cancel"},
	}
	var current atomic.Value // the action the host answers
	reqs := elicitHost(s, func(f *frame) any { return answers[current.Load().(string)] })
	initElicit(s, map[string]bool{"form": true, "url": true})
	for _, action := range []string{"accept", "decline", "cancel"} {
		current.Store(action)
		key := "elicit-form-" + action
		session, res := elicitTurn(t, e, s, key, "elicit=form", nil)
		if res.Status != "completed" {
			t.Errorf("%s: turn %+v", action, res)
		}
		f := nextRequest(t, reqs, "session/elicitation")
		var p struct {
			Session     string  `json:"session"`
			RequestID   *string `json:"requestId"`
			Elicitation struct {
				Mode            string          `json:"mode"`
				Message         string          `json:"message"`
				SessionID       string          `json:"sessionId"`
				RequestedSchema json.RawMessage `json:"requestedSchema"`
			} `json:"elicitation"`
		}
		if err := json.Unmarshal(f.Params, &p); err != nil || p.Session != session || p.RequestID == nil || *p.RequestID != "t1" ||
			p.Elicitation.Mode != "form" || p.Elicitation.Message == "" || !strings.Contains(string(p.Elicitation.RequestedSchema), `"strategy"`) {
			t.Errorf("%s: session/elicitation params %s", action, f.Params)
		}
		caps, got := elicitReport(s, session, "t1")
		if caps != `{"form":{},"url":{}}` {
			t.Errorf("%s: agent was offered %s, want {\"form\":{},\"url\":{}}", action, caps)
		}
		want := action + " null"
		if action == "accept" {
			want = `accept {"count":3,"strategy":"balanced"}`
		}
		if got != want {
			t.Errorf("%s: agent got %q, want %q", action, got, want)
		}
		if n := oneElicitNote(t, s, session); n.Action != action || n.Rule != "host" || n.Mode != "form" || n.Error != nil {
			t.Errorf("%s: audit %+v, want action %s by host", action, n, action)
		}
		var ev struct {
			Events []struct {
				Method string `json:"method"`
			} `json:"events"`
		}
		s.mustCall("session/events", map[string]any{"sessionKey": key}, &ev)
		var methods []string
		for _, x := range ev.Events {
			if strings.HasPrefix(x.Method, "session/elicitation") {
				methods = append(methods, x.Method)
			}
		}
		if strings.Join(methods, ",") != "session/elicitation,session/elicitationDecided" {
			t.Errorf("%s: journal has %v, want the request then its audit", action, methods)
		}
		closeProof(s, session, nil)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestElicitation_URLAcceptedThenComplete: a url elicitation accepted by
// the host reaches the agent as accept without content; the agent's
// elicitation/complete reaches the host as session/elicitationComplete;
// the audit names the elicitationId.
func TestElicitation_URLAcceptedThenComplete(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	elicitHost(s, func(f *frame) any { return map[string]any{"action": "accept"} })
	initElicit(s, map[string]bool{"url": true})
	session, res := elicitTurn(t, e, s, "elicit-url", "elicit=url", nil)
	if res.Status != "completed" {
		t.Errorf("turn %+v", res)
	}
	caps, got := elicitReport(s, session, "t1")
	if caps != `{"url":{}}` || got != "accept null" {
		t.Errorf("agent offered %s, got %q; want {\"url\":{}} and \"accept null\"", caps, got)
	}
	s.waitNote("session/elicitationComplete", 20*time.Second, func(p json.RawMessage) bool {
		var n struct {
			Session       string `json:"session"`
			ElicitationID string `json:"elicitationId"`
		}
		return json.Unmarshal(p, &n) == nil && n.Session == session && n.ElicitationID == "fa-elicit-1"
	})
	if n := oneElicitNote(t, s, session); n.Action != "accept" || n.ElicitationID != "fa-elicit-1" || n.Mode != "url" {
		t.Errorf("audit %+v, want accept of fa-elicit-1", n)
	}
	closeProof(s, session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestElicitation_HostWithoutCapability: a host that declared no
// elicitation makes the sidecar offer agents none (no clientCapabilities
// .elicitation) and refuse an agent's elicitation/create -32601; a host
// that declared form only makes a url elicitation -32602. The host is
// asked nothing; both refusals are audited.
func TestElicitation_HostWithoutCapability(t *testing.T) {
	for _, c := range []struct {
		name  string
		modes map[string]bool
		agent string
		caps  string
		code  int
	}{
		{"none", nil, "elicit=form", "null", -32601},
		{"all-false", map[string]bool{"form": false, "url": false}, "elicit=form", "null", -32601},
		{"form-only", map[string]bool{"form": true}, "elicit=url", `{"form":{}}`, -32602},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newFaultEnv(t)
			s := startSidecar(t, "--state-dir", e.stateDir)
			reqs := elicitHost(s, func(f *frame) any { return map[string]any{"action": "accept"} })
			initElicit(s, c.modes)
			session, res := elicitTurn(t, e, s, "elicit-refused", c.agent, nil)
			if res.Status != "completed" {
				t.Errorf("turn %+v", res)
			}
			caps, got := elicitReport(s, session, "t1")
			if caps != c.caps || got != fmt.Sprintf("error %d", c.code) {
				t.Errorf("agent offered %s, got %q; want %s and error %d", caps, got, c.caps, c.code)
			}
			select {
			case f := <-reqs:
				t.Errorf("the host was asked %s %s", f.Method, f.Params)
			default:
			}
			if n := oneElicitNote(t, s, session); n.Action != "refused" {
				t.Errorf("audit %+v, want refused", n)
			}
			closeProof(s, session, nil)
			waitNoMarked(t, e.mark, e.work, 10*time.Second)
		})
	}
}

// TestElicitation_MalformedRefused: a form elicitation without
// requestedSchema is refused -32602 without asking the host.
func TestElicitation_MalformedRefused(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	reqs := elicitHost(s, func(f *frame) any { return map[string]any{"action": "accept"} })
	initElicit(s, map[string]bool{"form": true})
	session, _ := elicitTurn(t, e, s, "elicit-malformed", "elicit=malformed", nil)
	if _, got := elicitReport(s, session, "t1"); got != "error -32602" {
		t.Errorf("agent got %q, want error -32602", got)
	}
	if len(reqs) != 0 {
		t.Errorf("the host was asked")
	}
	if n := oneElicitNote(t, s, session); n.Action != "refused" || !strings.HasPrefix(n.Rule, "malformed: ") {
		t.Errorf("audit %+v, want refused as malformed", n)
	}
	closeProof(s, session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestElicitation_BadAnswerRefused: an accepted form whose content does
// not match the requested schema (a value outside the enum, a member the
// schema lacks, the required member missing) is not passed on: the agent
// gets cancel, the audit carries the -32602 naming the bad member.
func TestElicitation_BadAnswerRefused(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	accept := func(content map[string]any) any { return map[string]any{"action": "accept", "content": content} }
	cases := []struct {
		content any // the whole answer
		field   string
	}{
		{accept(map[string]any{"strategy": "reckless"}), "content.strategy"},
		{accept(map[string]any{"strategy": "balanced", "extra": "x"}), "content.extra"},
		{accept(map[string]any{"count": 3}), "content.strategy"},
		{accept(map[string]any{"strategy": "balanced", "count": 12}), "content.count"},
		// Answers of the wrong shape: refused the same way (they had been
		// audited "host error" without the -32602; a fresh-user trial).
		{"accept", "result"},
		{json.RawMessage(`{"action":"accept","content":{"strategy":"balanced"},"Action":"decline"}`), "Action"},
	}
	s.hostUnchecked.Store(true) // the last two answers break the schema on purpose
	var current atomic.Value    // the answer the host sends, as JSON
	elicitHost(s, func(f *frame) any { return current.Load().(json.RawMessage) })
	initElicit(s, map[string]bool{"form": true})
	for i, c := range cases {
		b, _ := json.Marshal(c.content)
		current.Store(json.RawMessage(b))
		session, res := elicitTurn(t, e, s, fmt.Sprintf("elicit-bad-%d", i), "elicit=form", nil)
		if res.Status != "completed" {
			t.Errorf("%v: turn %+v", c.content, res)
		}
		if _, got := elicitReport(s, session, "t1"); got != "cancel null" {
			t.Errorf("%v: agent got %q, want cancel null", c.content, got)
		}
		n := oneElicitNote(t, s, session)
		if n.Action != "cancel" || n.Error == nil || n.Error.Code != -32602 || n.Error.Data.Code != "INVALID_PARAMS" || n.Error.Data.Field != c.field {
			t.Errorf("%v: audit %+v (error %+v), want cancel with -32602 field %s", c.content, n, n.Error, c.field)
		}
		closeProof(s, session, nil)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestElicitation_BoundAnswersCancel: a host that never answers is
// bounded by elicitationTimeoutMs: the agent gets cancel, the audit says
// elicitationTimeoutMs, and the turn completes.
func TestElicitation_BoundAnswersCancel(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	elicitHost(s, func(f *frame) any { return nil })
	initElicit(s, map[string]bool{"form": true})
	start := time.Now()
	session, res := elicitTurn(t, e, s, "elicit-bound", "elicit=form", map[string]any{"elicitationTimeoutMs": 300})
	if res.Status != "completed" {
		t.Errorf("turn %+v", res)
	}
	if _, got := elicitReport(s, session, "t1"); got != "cancel null" {
		t.Errorf("agent got %q, want cancel null", got)
	}
	if n := oneElicitNote(t, s, session); n.Action != "cancel" || n.Rule != "elicitationTimeoutMs" {
		t.Errorf("audit %+v, want cancel by elicitationTimeoutMs", n)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Errorf("the turn ended before the bound")
	}
	closeProof(s, session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestElicitation_TurnEndsFirst: the turn's authority ends with it: a
// cancelled turn answers the pending elicitation cancel, and the host's
// later accept changes nothing (no second audit).
func TestElicitation_TurnEndsFirst(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	var asked atomic.Int32
	reqs := elicitHost(s, func(f *frame) any {
		if asked.Add(1) == 1 {
			return nil // t1's: held until the turn has ended
		}
		return map[string]any{"action": "decline"}
	})
	initElicit(s, map[string]bool{"form": true})
	var o openResult
	s.mustCall("session/open", acpCheckedParams(t, e, "elicit-turn-end", "elicit=form"), &o)
	id := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "ask"})
	f := nextRequest(t, reqs, "session/elicitation")
	s.mustCall("session/cancel", map[string]any{"session": o.Session}, nil)
	res := decodeResult[turnResult](t, "cancelled turn", s.await(id, 20*time.Second))
	if res.Status != "cancelled" {
		t.Errorf("turn %+v, want cancelled", res)
	}
	n := oneElicitNote(t, s, o.Session)
	if n.Action != "cancel" || !strings.HasPrefix(n.Rule, "turn ") {
		t.Errorf("audit %+v, want cancel by the turn's end", n)
	}
	s.send(map[string]any{"jsonrpc": "2.0", "id": f.ID, "result": map[string]any{"action": "accept", "content": map[string]any{"strategy": "balanced"}}})
	runTurn(t, s, o.Session, "t2", "after") // the late answer was handled (or dropped) before this turn's end
	if ns := elicitNotes(s, o.Session); len(ns) != 2 || ns[1].RequestID == nil || *ns[1].RequestID != "t2" || ns[1].Action != "decline" {
		t.Errorf("audits %+v: the late answer of t1 changed something", ns)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestElicitation_PendingBoundShared: elicitations count against the
// turn's --max-pending-asks: with a bound of 2 and a host holding every
// ask, three elicitations sent at once put two to the host and answer the
// third cancel at once (rule naming the bound); the held two end with
// elicitationTimeoutMs.
func TestElicitation_PendingBoundShared(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir, "--max-pending-asks", "2")
	reqs := elicitHost(s, func(f *frame) any { return nil })
	initElicit(s, map[string]bool{"form": true})
	session, res := elicitTurn(t, e, s, "elicit-bound-shared", "elicit=form,elicit-count=3", map[string]any{"elicitationTimeoutMs": 1000})
	if res.Status != "completed" {
		t.Errorf("turn %+v", res)
	}
	if n := len(reqs); n != 2 {
		t.Errorf("the host was asked %d elicitations, want 2 (the bound)", n)
	}
	var rules []string
	for _, n := range elicitNotes(s, session) {
		if n.Action != "cancel" {
			t.Errorf("audit %+v, want cancel", n)
		}
		rules = append(rules, n.Rule)
	}
	if len(rules) != 3 || !strings.HasPrefix(rules[0], "more than 2 asks") || rules[1] != "elicitationTimeoutMs" || rules[2] != "elicitationTimeoutMs" {
		t.Errorf("audit rules %q, want the bound's refusal then two elicitationTimeoutMs", rules)
	}
	closeProof(s, session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
