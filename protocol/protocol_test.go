package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestTime_NineFractionalDigits: docs/protocol.md §1 Conventions, "RFC 3339
// strings in UTC with exactly nine fractional digits" — trailing zeros are
// kept, the zone is UTC.
func TestTime_NineFractionalDigits(t *testing.T) {
	loc := time.FixedZone("x", 3600)
	b, err := json.Marshal(At(time.Date(2026, 11, 29, 18, 18, 24, 946000000, loc)))
	if err != nil || string(b) != `"2026-11-29T17:18:24.946000000Z"` {
		t.Fatalf("got %s %v", b, err)
	}
	var back Time
	if err := json.Unmarshal(b, &back); err != nil || !back.Equal(time.Date(2026, 11, 29, 17, 18, 24, 946000000, time.UTC)) {
		t.Fatalf("round trip: %v %v", back, err)
	}
}

// TestValidate_FirstBadFieldNamed: docs/protocol.md §5 — -32602 names the
// first bad field as a dot path; defaults are filled.
func TestValidate_FirstBadFieldNamed(t *testing.T) {
	ok := func() OpenParams {
		return OpenParams{SessionKey: "k", Agent: "codex", Command: &Command{Path: "/bin/true"}, Cwd: "/tmp"}
	}
	cases := map[string]func(p *OpenParams){
		"sessionKey":                     func(p *OpenParams) { p.SessionKey = "" },
		"agent":                          func(p *OpenParams) { p.Agent = "" },
		"command":                        func(p *OpenParams) { p.Command = nil },
		"command.path":                   func(p *OpenParams) { p.Command.Path = "rel/path" },
		"command.args.1":                 func(p *OpenParams) { p.Command.Args = []string{"a", "b\x00"} },
		"command.sha256":                 func(p *OpenParams) { p.Command.Sha256 = "abc" },
		"cwd":                            func(p *OpenParams) { p.Cwd = "tmp" },
		"env":                            func(p *OpenParams) { p.Env = map[string]string{"A=B": "x"} },
		"permissionMode":                 func(p *OpenParams) { p.PermissionMode = "yolo" },
		"nonInteractivePermissions":      func(p *OpenParams) { p.NonInteractivePermissions = "ask" },
		"permissionPolicy.escalate.0":    func(p *OpenParams) { p.PermissionPolicy = &PermissionPolicy{Escalate: []string{"nuke"}} },
		"permissionPolicy.defaultAction": func(p *OpenParams) { p.PermissionPolicy = &PermissionPolicy{DefaultAction: "maybe"} },
		"handshakeTimeoutMs":             func(p *OpenParams) { v := int64(600001); p.HandshakeTimeoutMs = &v },
		"mcpServers.0":                   func(p *OpenParams) { p.McpServers = []json.RawMessage{json.RawMessage(`[]`)} },
		"elicitationTimeoutMs":           func(p *OpenParams) { v := int64(0); p.ElicitationTimeoutMs = &v },
	}
	for field, breakIt := range cases {
		p := ok()
		breakIt(&p)
		e := p.Validate()
		if e == nil || e.RPCCode != CodeInvalidParams || e.Data.Field != field {
			t.Errorf("%s: got %+v", field, e)
		}
	}
	p := ok()
	if e := p.Validate(); e != nil || p.PermissionMode != "approve-reads" || p.NonInteractivePermissions != "deny" {
		t.Fatalf("valid params: %v, defaults %q %q", e, p.PermissionMode, p.NonInteractivePermissions)
	}
}

// TestValidate_KeysThatDecodedToReplacementRefused: a sessionKey or
// requestId holding U+FFFD — what a lone surrogate escape or an invalid
// byte decodes to — is refused, since two such keys sent differently
// would name one record; an ordinary non-ASCII key is not.
func TestValidate_KeysThatDecodedToReplacementRefused(t *testing.T) {
	for _, raw := range []string{`"tenant-\ud800"`, `"tenant-\udfff"`, `"tenant-\ufffd"`} {
		var key string
		if err := json.Unmarshal([]byte(raw), &key); err != nil {
			t.Fatal(err)
		}
		p := OpenParams{SessionKey: key, Agent: "codex", Command: &Command{Path: "/bin/true"}, Cwd: "/tmp"}
		if e := p.Validate(); e == nil || e.RPCCode != CodeInvalidParams || e.Data.Field != "sessionKey" {
			t.Errorf("sessionKey %s: %+v, want -32602 field sessionKey", raw, e)
		}
		pp := PromptParams{Session: "s-1", RequestID: key, Prompt: json.RawMessage(`"hi"`)}
		if e := pp.Validate(); e == nil || e.Data.Field != "requestId" {
			t.Errorf("requestId %s: %+v, want field requestId", raw, e)
		}
	}
	p := OpenParams{SessionKey: "tenant-é-日本", Agent: "codex", Command: &Command{Path: "/bin/true"}, Cwd: "/tmp"}
	if e := p.Validate(); e != nil {
		t.Errorf("a non-ASCII key: %v", e)
	}
}

// TestValidate_StateDirCleaned: one spelling per state directory, so
// "/s/" and "/s" name one store (one ledger sweep, one set of key holds).
func TestValidate_StateDirCleaned(t *testing.T) {
	p := OpenParams{SessionKey: "k", Agent: "codex", Command: &Command{Path: "/bin/true"}, Cwd: "/tmp", StateDir: "/var/lib/acpx//x/../s/"}
	if e := p.Validate(); e != nil || p.StateDir != "/var/lib/acpx/s" {
		t.Fatalf("stateDir %q (%v), want /var/lib/acpx/s", p.StateDir, e)
	}
	ev := EventsParams{SessionKey: "k", StateDir: "/s/"}
	if e := ev.Validate(); e != nil || ev.StateDir != "/s" {
		t.Fatalf("events stateDir %q (%v), want /s", ev.StateDir, e)
	}
}

// TestValidate_UnknownSandboxMemberRefused: a sandbox member the sidecar
// does not know is -32602 naming it, not silently ignored.
func TestValidate_UnknownSandboxMemberRefused(t *testing.T) {
	var p OpenParams
	raw := `{"sessionKey":"k","agent":"codex","command":{"path":"/bin/true"},"cwd":"/tmp","sandbox":{"connectTcp":[1]}}`
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		t.Fatal(err)
	}
	if e := p.Validate(); e == nil || e.Data.Field != "sandbox.connectTcp" {
		t.Fatalf("unknown sandbox member: %+v, want -32602 field sandbox.connectTcp", e)
	}
	raw = `{"sessionKey":"k","agent":"codex","command":{"path":"/bin/true"},"cwd":"/tmp","sandbox":{"network":{"connectTcp":[443]}}}`
	p = OpenParams{}
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		t.Fatal(err)
	}
	if e := p.Validate(); e != nil {
		t.Fatalf("a known sandbox: %v", e)
	}
}

// TestValidate_EnvValuesNeverInMessages: docs/rules.md#r3 — validation
// errors never echo an env value.
func TestValidate_EnvValuesNeverInMessages(t *testing.T) {
	p := OpenParams{SessionKey: "k", Agent: "codex", Command: &Command{Path: "/bin/true"}, Cwd: "/tmp",
		Env: map[string]string{"KEY": "sk-secret\x00value"}}
	e := p.Validate()
	if e == nil || e.Data.Field != "env.KEY" {
		t.Fatalf("got %+v", e)
	}
	if b, _ := json.Marshal(e.Data); contains(e.Message, "sk-secret") || contains(string(b), "sk-secret") {
		t.Fatalf("secret echoed: %s", e.Message)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestValidate_RelativeHomeAndTmpDirRefused (found by a user trial): a
// relative env.HOME or env.TMPDIR is refused -32602 naming the member,
// without echoing the value; absolute ones and an empty one pass.
func TestValidate_RelativeHomeAndTmpDirRefused(t *testing.T) {
	for _, name := range []string{"HOME", "TMPDIR"} {
		for v, bad := range map[string]bool{"relhome": true, "./x": true, "/abs/dir": false, "": false} {
			p := OpenParams{SessionKey: "k", Agent: "codex", Command: &Command{Path: "/bin/true"}, Cwd: "/tmp",
				Env: map[string]string{name: v}}
			e := p.Validate()
			if !bad {
				if e != nil {
					t.Errorf("%s=%q: %v", name, v, e)
				}
				continue
			}
			if e == nil || e.RPCCode != CodeInvalidParams || e.Data.Field != "env."+name || strings.Contains(e.Message, v) {
				t.Errorf("%s=%q: got %+v, want -32602 field env.%s without the value", name, v, e, name)
			}
		}
	}
}

// TestValidate_PromptShapes: prompt is a non-empty string or ContentBlock[]
// with a type each; config values are strings or booleans.
func TestValidate_PromptShapes(t *testing.T) {
	for raw, field := range map[string]string{`""`: "prompt", `[]`: "prompt", `5`: "prompt", `[{"text":"x"}]`: "prompt.0.type"} {
		p := PromptParams{Session: "s", RequestID: "r", Prompt: json.RawMessage(raw)}
		if e := p.Validate(); e == nil || e.Data.Field != field {
			t.Errorf("%s: got %+v", raw, e)
		}
	}
	for raw, bad := range map[string]bool{`"x"`: false, `true`: false, `5`: true, `{"a":1}`: true} {
		p := SetConfigOptionParams{Session: "s", Key: "k", Value: json.RawMessage(raw)}
		if e := p.Validate(); (e != nil) != bad {
			t.Errorf("value %s: %+v", raw, e)
		}
	}
}

// TestQuoteShort: a short string is quoted as is; a long one is cut to
// 80 bytes and marked.
func TestQuoteShort(t *testing.T) {
	if got := QuoteShort("Kind"); got != `"Kind"` {
		t.Errorf("%s", got)
	}
	long := strings.Repeat("x", 81)
	if got := QuoteShort(long); got != `"`+long[:80]+`…"` {
		t.Errorf("%s", got)
	}
}
