package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// Authentication, the agent's own sessions and the capability checks
// before sending (docs/protocol.md §23; PROTOCOL.md §9), against the
// fault agent's modes auth, auth-terminal, auth-fail, caps and tap
// (internal/faultagent/modes_ext.go).

// capErr is the data of a CAPABILITY_UNSUPPORTED or AUTH_* error.
type capErr struct {
	Capability  string            `json:"capability"`
	AuthMethods []json.RawMessage `json:"authMethods"`
}

func capErrOf(t *testing.T, f *frame) capErr {
	t.Helper()
	var d capErr
	if f.Error != nil {
		_ = json.Unmarshal(f.Error.Data, &d)
	}
	return d
}

// ownMark gives the open p a marker of its own (so a failed open's
// processes can be told from the test's live sessions) and returns it.
func ownMark(t *testing.T, p map[string]any) string {
	mark := testmark.New()
	killMarkedOnCleanup(t, mark)
	p["env"] = map[string]string{"ACPX_TEST_MARK": mark}
	return mark
}

// failOpen opens p, which must fail with dataCode, a complete cleanup
// proof and no process of it left; it returns the error frame.
func failOpen(t *testing.T, s *sidecar, e *faultEnv, what string, p map[string]any, dataCode string) *frame {
	t.Helper()
	mark := ownMark(t, p)
	f := s.call("session/open", p)
	d := wantError(t, what, f, -32000, dataCode)
	if d.Cleanup == nil || !d.Cleanup.Complete {
		t.Errorf("%s: no complete cleanup proof: %+v", what, d.Cleanup)
	}
	waitNoMarked(t, mark, "", 10*time.Second) // by its own marker: the test's live sessions share cwd
	return f
}

// TestAuth_MethodsAuthenticateAndAuthRequired: the open result lists the
// agent's authMethods verbatim; authMethod runs ACP authenticate before
// session/new; an agent that requires auth the open did not give fails
// AUTH_REQUIRED with the methods and a complete proof; a terminal-type
// method is never run; a failing authenticate is AUTH_FAILED.
func TestAuth_MethodsAuthenticateAndAuthRequired(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	initExt(s, false)
	modes := "auth=fa-key:FA_KEY;fa-other,auth-terminal=fa-login"

	f := failOpen(t, s, e, "open without authMethod", seedOpenParams(e, "auth-none", seedRecordFile(t), modes), "AUTH_REQUIRED")
	if c := capErrOf(t, f); len(c.AuthMethods) != 3 || !strings.Contains(string(c.AuthMethods[2]), `"type":"terminal"`) {
		t.Errorf("data.authMethods %s, want the agent's three", c.AuthMethods)
	}

	rec := seedRecordFile(t)
	p := seedOpenParams(e, "auth-other", rec, modes)
	p["authMethod"] = "fa-other"
	f = s.call("session/open", p)
	o := decodeResult[struct {
		Session     string            `json:"session"`
		AuthMethods []json.RawMessage `json:"authMethods"`
	}](t, "open with authMethod", f)
	if len(o.AuthMethods) != 3 || string(o.AuthMethods[0]) != `{"id":"fa-key","name":"fa-key","type":"env_var","vars":[{"name":"FA_KEY"}]}` {
		t.Errorf("open result authMethods %s, want the agent's verbatim", o.AuthMethods)
	}
	msgs := seedReadAgent(t, rec)
	auths := seedRecv(msgs, "authenticate")
	if len(auths) != 1 || !strings.Contains(string(auths[0].Msg.Params), `"methodId":"fa-other"`) {
		t.Fatalf("agent got authenticate %v, want one for fa-other", auths)
	}
	authAt, newAt := -1, -1
	for i, m := range msgs {
		if m.Dir == "recv" && m.Msg.Method == "authenticate" && authAt < 0 {
			authAt = i
		}
		if m.Dir == "recv" && m.Msg.Method == "session/new" && newAt < 0 {
			newAt = i
		}
	}
	if authAt < 0 || newAt < authAt {
		t.Errorf("authenticate (line %d) did not precede session/new (line %d)", authAt, newAt)
	}

	rec = seedRecordFile(t)
	p = seedOpenParams(e, "auth-terminal", rec, modes)
	p["authMethod"] = "fa-login"
	failOpen(t, s, e, "terminal method", p, "AUTH_FAILED")
	if len(seedRecv(seedReadAgent(t, rec), "authenticate")) != 0 {
		t.Errorf("the sidecar ran a terminal-type auth method")
	}

	p = seedOpenParams(e, "auth-fail", seedRecordFile(t), modes+",auth-fail")
	p["authMethod"] = "fa-key"
	failOpen(t, s, e, "failing authenticate", p, "AUTH_FAILED")

	p = seedOpenParams(e, "auth-unknown", seedRecordFile(t), modes)
	p["authMethod"] = "nope"
	failOpen(t, s, e, "unknown method", p, "AUTH_FAILED")
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}

// agentSessionsPage is the result of session/agentSessions.
type agentSessionsPage struct {
	Sessions []struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
	} `json:"sessions"`
	NextCursor *string `json:"nextCursor"`
}

// TestAgentSessions_PagesAndResumesOneByAgentSessionId: session/agentSessions
// pages the agent's ACP session/list verbatim; an agent without
// sessionCapabilities.list is UNSUPPORTED_CONTROL; session/open
// agentSessionId loads that ACP session and identity reports it.
func TestAgentSessions_PagesAndResumesOneByAgentSessionId(t *testing.T) {
	e := newFaultEnv(t)
	agentState := agentWritableDir(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	initExt(s, false)
	ids := map[string]bool{}
	var last seedOpen
	for _, k := range []string{"as-a", "as-b", "as-c"} {
		p := resumeParams(e, k, agentState, "caps=list")
		last = seedMustOpen(s, p)
		ids[last.Identity.BackendSessionID] = true
	}
	var page agentSessionsPage
	s.mustCall("session/agentSessions", map[string]any{"session": last.Session, "cwd": e.work}, &page)
	if len(page.Sessions) != 2 || page.NextCursor == nil || page.Sessions[0].Cwd != e.work {
		t.Fatalf("first page %+v, want two sessions in cwd and a nextCursor", page)
	}
	got := []string{page.Sessions[0].SessionID, page.Sessions[1].SessionID}
	cursor := *page.NextCursor
	page = agentSessionsPage{}
	s.mustCall("session/agentSessions", map[string]any{"session": last.Session, "cursor": cursor}, &page)
	if len(page.Sessions) != 1 || page.NextCursor != nil {
		t.Fatalf("second page %+v, want the last session and no cursor", page)
	}
	got = append(got, page.Sessions[0].SessionID)
	for _, id := range got {
		if !ids[id] {
			t.Errorf("listed %s, which none of the opens created (%v)", id, ids)
		}
		delete(ids, id)
	}
	f := s.call("session/agentSessions", map[string]any{"session": last.Session, "cursor": "99"})
	wantError(t, "bad cursor", f, -32000, "AGENT_ERROR")

	// Resume the first listed session by its ACP id, under another key.
	rec := seedRecordFile(t)
	p := resumeParams(e, "as-resume", agentState, "caps=list,record="+rec)
	p["agentSessionId"] = got[0]
	o := seedMustOpen(s, p)
	if !o.Resumed || o.Identity.BackendSessionID != got[0] {
		t.Errorf("open with agentSessionId: resumed %v identity %+v, want %s", o.Resumed, o.Identity, got[0])
	}
	if loads := seedRecv(seedReadAgent(t, rec), "session/load"); len(loads) != 1 || !strings.Contains(string(loads[0].Msg.Params), `"sessionId":"`+got[0]+`"`) {
		t.Errorf("agent got session/load %v, want one for %s", loads, got[0])
	}

	plain := seedMustOpen(s, e.openParams("as-plain", "normal"))
	wantError(t, "no sessionCapabilities.list", s.call("session/agentSessions", map[string]any{"session": plain.Session}), -32000, "UNSUPPORTED_CONTROL")
	if d := wantError(t, "relative cwd", s.call("session/agentSessions", map[string]any{"session": plain.Session, "cwd": "rel"}), -32602, ""); d.Field != "cwd" {
		t.Errorf("data.field %q, want cwd", d.Field)
	}
}

// TestAdditionalDirectories_PassedWhereAdvertisedRefusedElsewhere: passed
// to session/new and writable in the sandbox where the agent advertises
// sessionCapabilities.additionalDirectories; else CAPABILITY_UNSUPPORTED
// with a complete proof, nothing left running, no session/new sent.
func TestAdditionalDirectories_PassedWhereAdvertisedRefusedElsewhere(t *testing.T) {
	e := newFaultEnv(t)
	extra := agentWritableDir(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	initExt(s, false)

	rec := seedRecordFile(t)
	p := seedOpenParams(e, "dirs-yes", rec, "caps=dirs")
	p["additionalDirectories"] = []string{extra}
	var o struct {
		Session string `json:"session"`
		Sandbox *struct {
			Enforced bool     `json:"enforced"`
			Writable []string `json:"writable"`
		} `json:"sandbox"`
	}
	s.mustCall("session/open", p, &o)
	news := seedRecv(seedReadAgent(t, rec), "session/new")
	if len(news) != 1 || !strings.Contains(string(news[0].Msg.Params), `"additionalDirectories":["`+extra+`"]`) {
		t.Errorf("session/new %v, want additionalDirectories [%s]", news, extra)
	}
	if o.Sandbox != nil && o.Sandbox.Enforced {
		real, _ := filepath.EvalSymlinks(extra)
		found := false
		for _, w := range o.Sandbox.Writable {
			found = found || w == real
		}
		if !found {
			t.Errorf("sandbox writable %v lacks %s", o.Sandbox.Writable, real)
		}
	}

	rec = seedRecordFile(t)
	p = seedOpenParams(e, "dirs-no", rec, "")
	p["additionalDirectories"] = []string{extra}
	f := failOpen(t, s, e, "no additionalDirectories capability", p, "CAPABILITY_UNSUPPORTED")
	if c := capErrOf(t, f); c.Capability != "sessionCapabilities.additionalDirectories" {
		t.Errorf("data.capability %q", c.Capability)
	}
	if n := len(seedRecv(seedReadAgent(t, rec), "session/new")); n != 0 {
		t.Errorf("the agent got %d session/new for a refused open", n)
	}

	p = seedOpenParams(e, "dirs-missing", seedRecordFile(t), "caps=dirs")
	p["additionalDirectories"] = []string{filepath.Join(extra, "missing")}
	if d := wantError(t, "missing directory", s.call("session/open", p), -32602, ""); d.Field != "additionalDirectories.0" {
		t.Errorf("data.field %q", d.Field)
	}
	p["additionalDirectories"] = []string{"relative"}
	if d := wantError(t, "relative directory", s.call("session/open", p), -32602, ""); d.Field != "additionalDirectories.0" {
		t.Errorf("data.field %q", d.Field)
	}
}

// TestCapabilities_RefusedBeforeSending: prompt blocks and mcpServers
// transports the agent's capabilities lack are CAPABILITY_UNSUPPORTED
// with data.capability, and never reach the agent.
func TestCapabilities_RefusedBeforeSending(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	initExt(s, false)
	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "caps-none", rec, ""))
	blocks := map[string]map[string]any{
		"promptCapabilities.image":           {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
		"promptCapabilities.audio":           {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="},
		"promptCapabilities.embeddedContext": {"type": "resource", "resource": map[string]any{"uri": "file:///a", "text": "x"}},
	}
	for want, b := range blocks {
		f := s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "r-" + want,
			"prompt": []any{map[string]any{"type": "text", "text": "look"}, b}})
		wantError(t, want, f, -32000, "CAPABILITY_UNSUPPORTED")
		if c := capErrOf(t, f); c.Capability != want {
			t.Errorf("data.capability %q, want %q", c.Capability, want)
		}
	}
	// A resource_link is baseline; the refused requestIds stay unused.
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "r-promptCapabilities.image",
		"prompt": []any{map[string]any{"type": "resource_link", "uri": "file:///a", "name": "a"}}}, nil)
	if n := len(seedRecv(seedReadAgent(t, rec), "session/prompt")); n != 1 {
		t.Errorf("the agent got %d session/prompt, want only the accepted one", n)
	}

	img := seedMustOpen(s, seedOpenParams(e, "caps-image", seedRecordFile(t), "caps=image"))
	s.mustCall("session/prompt", map[string]any{"session": img.Session, "requestId": "t1",
		"prompt": []any{blocks["promptCapabilities.image"]}}, nil)

	for _, c := range []struct{ typ, want string }{{"http", "mcpCapabilities.http"}, {"sse", "mcpCapabilities.sse"}} {
		rec := seedRecordFile(t)
		p := seedOpenParams(e, "mcp-"+c.typ, rec, "")
		p["mcpServers"] = []any{map[string]any{"type": c.typ, "name": "web", "url": "https://mcp.test/", "headers": []any{}}}
		f := failOpen(t, s, e, c.want, p, "CAPABILITY_UNSUPPORTED")
		if ce := capErrOf(t, f); ce.Capability != c.want {
			t.Errorf("data.capability %q, want %q", ce.Capability, c.want)
		}
		if n := len(seedRecv(seedReadAgent(t, rec), "session/new")); n != 0 {
			t.Errorf("%s: the agent got session/new", c.typ)
		}
	}
}

// TestCapabilities_NoTypeTheCheckCannotRead: the blocks and mcpServers
// entries go to the agent byte for byte, so the check reads their type as
// the agent will: a case variant of "type" beside it, a type named twice,
// a type in another case or one ACP does not define is -32602 and never
// reaches the agent (a "Type":"text" beside "type":"audio" had passed the
// check as text and reached an agent without promptCapabilities.audio;
// found by a fresh-user trial).
func TestCapabilities_NoTypeTheCheckCannotRead(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.hostUnchecked.Store(true) // some of these blocks break the schema on purpose
	initExt(s, false)
	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "caps-strict", rec, ""))
	for i, blocks := range []string{
		`[{"type":"audio","data":"x","Type":"text"}]`,
		`[{"Type":"text","type":"audio","data":"x"}]`,
		`[{"type":"text","text":"a","type":"image"}]`,
		`[{"type":"IMAGE","mimeType":"image/png","data":"x"}]`,
		`[{"type":"video","data":"x"}]`,
		`[{"text":"no type"}]`,
	} {
		f := s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "r" + strconv.Itoa(i), "prompt": json.RawMessage(blocks)})
		wantError(t, blocks, f, -32602, "INVALID_PARAMS")
	}
	if n := len(seedRecv(seedReadAgent(t, rec), "session/prompt")); n != 0 {
		t.Errorf("the agent got %d session/prompt, want none", n)
	}
	for i, srv := range []string{
		`{"type":"http","name":"x","url":"http://127.0.0.1:1","headers":[],"Type":"stdio","command":"/bin/true","args":[],"env":[]}`,
		`{"type":"websocket","name":"x","url":"ws://127.0.0.1:1"}`,
	} {
		rec := seedRecordFile(t)
		p := seedOpenParams(e, "mcp-strict-"+strconv.Itoa(i), rec, "")
		p["mcpServers"] = []any{json.RawMessage(srv)}
		mark := ownMark(t, p)
		wantError(t, srv, s.call("session/open", p), -32602, "INVALID_PARAMS")
		waitNoMarked(t, mark, "", 10*time.Second)
		if n := len(seedRecv(seedReadAgent(t, rec), "session/new")); n != 0 {
			t.Errorf("%s: the agent got session/new", srv)
		}
	}
}

// TestCapabilities_McpServersAndPromptBlocksReachTheAgentByteForByte: the
// host's mcpServers entries and prompt blocks (unknown members, member
// order, escapes, number spellings) are in the agent's session/new and
// session/prompt lines exactly as the host wrote them (the agent's tap
// of its stdin).
func TestCapabilities_McpServersAndPromptBlocksReachTheAgentByteForByte(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	initExt(s, false)
	tap := filepath.Join(agentWritableDir(t), "stdin.tap")
	stdio := `{"name":"fs","command":"/bin/true","args":["a b","\u00e9"],"env":[{"name":"K","value":"v"}],"zExtra":{"n":[1,2.50,1e3,true,null]},"_meta":{"k":"v"}}`
	http := `{"url":"https://mcp.test/x","type":"http","headers":[],"name":"web","x-unknown":"kept"}`
	block := `{"type":"text","text":"hi \u00e9 \ud83d\ude00","_meta":{"z":1},"annotations":{"priority":0.50}}`
	p := seedOpenParams(e, "bytes", seedRecordFile(t), "caps=http,tap="+tap)
	p["mcpServers"] = []json.RawMessage{json.RawMessage(stdio), json.RawMessage(http)}
	o := seedMustOpen(s, p)
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1",
		"prompt": []json.RawMessage{json.RawMessage(block)}}, nil)
	b, err := os.ReadFile(tap)
	if err != nil {
		t.Fatal(err)
	}
	var newLine, promptLine string
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.Contains(l, `"method":"session/new"`):
			newLine = l
		case strings.Contains(l, `"method":"session/prompt"`):
			promptLine = l
		}
	}
	if !strings.Contains(newLine, `"mcpServers":[`+stdio+`,`+http+`]`) {
		t.Errorf("session/new on the agent's stdin:\n%s\nwant mcpServers byte for byte:\n[%s,%s]", newLine, stdio, http)
	}
	if !strings.Contains(promptLine, `"prompt":[`+block+`]`) {
		t.Errorf("session/prompt on the agent's stdin:\n%s\nwant the block byte for byte:\n%s", promptLine, block)
	}
}

// TestCapabilities_BooleanConfigOptionsAdvertisedAndAnswered: initialize
// advertises clientCapabilities.session.configOptions.boolean, so the
// fault agent offers its boolean option fa-fast, and
// session/setConfigOption with a boolean sets and verifies it (ACP
// session/set_config_option type boolean).
func TestCapabilities_BooleanConfigOptionsAdvertisedAndAnswered(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	initExt(s, false)
	rec := seedRecordFile(t)
	var o struct {
		Session       string            `json:"session"`
		ConfigOptions []json.RawMessage `json:"configOptions"`
	}
	s.mustCall("session/open", seedOpenParams(e, "bool", rec, ""), &o)
	msgs := seedReadAgent(t, rec)
	if inits := seedRecv(msgs, "initialize"); len(inits) != 1 ||
		!strings.Contains(string(inits[0].Msg.Params), `"session":{"configOptions":{"boolean":{}}}`) {
		t.Fatalf("initialize %v does not advertise boolean config options", inits)
	}
	if !strings.Contains(string(joinRaw(o.ConfigOptions)), `"id":"fa-fast"`) {
		t.Fatalf("open configOptions %s lack the agent's boolean option", joinRaw(o.ConfigOptions))
	}
	var res struct {
		ConfigOptions []json.RawMessage `json:"configOptions"`
	}
	s.mustCall("session/setConfigOption", map[string]any{"session": o.Session, "key": "fa-fast", "value": true}, &res)
	if !strings.Contains(string(joinRaw(res.ConfigOptions)), `"currentValue":true,"id":"fa-fast"`) {
		t.Errorf("after setConfigOption fa-fast=true: %s", joinRaw(res.ConfigOptions))
	}
	sets := seedRecv(seedReadAgent(t, rec), "session/set_config_option")
	if len(sets) != 1 || !strings.Contains(string(sets[0].Msg.Params), `"type":"boolean"`) || !strings.Contains(string(sets[0].Msg.Params), `"value":true`) {
		t.Errorf("agent got %v, want one boolean session/set_config_option", sets)
	}
}

func joinRaw(raws []json.RawMessage) []byte {
	b, _ := json.Marshal(raws)
	return b
}
