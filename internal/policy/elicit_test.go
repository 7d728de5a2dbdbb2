package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParseElicitation: elicitation/create params are read strictly; a
// form request carries its compiled schema, a url request its
// elicitationId; a sessionId must be the session's once it is known
// (docs/protocol.md §22).
func TestParseElicitation(t *testing.T) {
	const form = `"requestedSchema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`
	for _, c := range []struct {
		name, params, sid string
		why               string // "" = well-formed; else a part of the reason
		mode, id          string
	}{
		{"form", `{"sessionId":"s1","mode":"form","message":"pick",` + form + `}`, "s1", "", "form", ""},
		{"url", `{"mode":"url","message":"log in","elicitationId":"e1","url":"https://x"}`, "s1", "", "url", "e1"},
		{"session not known yet", `{"sessionId":"other","mode":"form","message":"m",` + form + `}`, "", "", "form", ""},
		{"another mode is read as sent", `{"mode":"voice","message":"m"}`, "", "", "voice", ""},
		{"other session", `{"sessionId":"s2","mode":"form","message":"m",` + form + `}`, "s1", "sessionId is not this session's", "form", ""},
		{"sessionId not a string", `{"sessionId":5,"mode":"form","message":"m",` + form + `}`, "", "sessionId is not this session's", "form", ""},
		{"not an object", `["mode"]`, "", "params: not a JSON object", "", ""},
		{"duplicate", `{"mode":"url","mode":"form","message":"m"}`, "", "params: a member name occurs twice", "", ""},
		{"case variant", `{"Mode":"form","message":"m"}`, "", "only by case", "", ""},
		{"no message", `{"mode":"form",` + form + `}`, "", "message is not a string", "", ""},
		{"mode not a string", `{"mode":1,"message":"m"}`, "", "mode is not a string", "", ""},
		{"no schema", `{"mode":"form","message":"m"}`, "", "requestedSchema is not an object", "form", ""},
		{"bad schema", `{"mode":"form","message":"m","requestedSchema":{"type":"array"}}`, "", `requestedSchema: type is not "object"`, "form", ""},
		{"url without id", `{"mode":"url","message":"m","url":"https://x"}`, "", "elicitationId is not a string", "url", ""},
		{"url with empty id", `{"mode":"url","message":"m","elicitationId":"","url":"https://x"}`, "", "elicitationId is not a string", "url", ""},
		{"url without url", `{"mode":"url","message":"m","elicitationId":"e1"}`, "", "url is not a string", "url", "e1"},
	} {
		pe, why := ParseElicitation(json.RawMessage(c.params), c.sid)
		switch {
		case c.why == "" && why != "":
			t.Errorf("%s: refused: %s", c.name, why)
		case c.why != "" && !strings.Contains(why, c.why):
			t.Errorf("%s: reason %q, want one containing %q", c.name, why, c.why)
		case pe == nil:
			if c.mode != "" {
				t.Errorf("%s: no request read", c.name)
			}
		case pe.Mode != c.mode || pe.ElicitationID != c.id || pe.Size != len(c.params):
			t.Errorf("%s: %+v, want mode %q id %q size %d", c.name, pe, c.mode, c.id, len(c.params))
		case c.why == "" && (pe.Form != nil) != (c.mode == "form"):
			t.Errorf("%s: form %v", c.name, pe.Form)
		}
	}
}

// TestForm_Check: content is an object of the schema's properties, each
// an ElicitationContentValue, the required ones present, all valid;
// field names the first bad member.
func TestForm_Check(t *testing.T) {
	f, why := compileForm(json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1},"s":{"type":"string"},"l":{"type":"array","items":{"type":"string"}}},"required":["n"]}`))
	if f == nil {
		t.Fatal(why)
	}
	for _, c := range []struct {
		content, field, why string // field "" = matches
	}{
		{`{"n":2,"s":"x","l":["a"]}`, "", ""},
		{`{"n":2}`, "", ""},
		{`{"s":"x"}`, "content.n", `the required "n" is missing`},
		{`{"n":2,"x":1}`, "content.x", `"x" is not a property of the requested schema`},
		{`{"n":2,"s":null}`, "content.s", "not a string, number, boolean or array of strings"},
		{`{"n":2,"l":[1]}`, "content.l", "not a string, number, boolean or array of strings"},
		{`{"n":2,"l":["a",null]}`, "content.l.1", `fails the requested schema's "type"`},
		{`{"n":0}`, "content.n", `fails the requested schema's "minimum"`},
		{`{"n":"2"}`, "content.n", `fails the requested schema's "type"`},
		{`{"n":2,"n":3}`, "content", "a member name occurs twice"},
		{`"n"`, "content", "not a JSON object"},
	} {
		field, why := f.Check(json.RawMessage(c.content))
		if field != c.field || why != c.why {
			t.Errorf("Check(%s) = %q, %q; want %q, %q", c.content, field, why, c.field, c.why)
		}
	}
}

// TestContentValue: strings, numbers, booleans and arrays of strings are
// ElicitationContentValues; null, objects and other arrays are not. A
// null in an array passes here (encoding/json decodes it into a []string
// as ""): the property schema's items refuse it (TestForm_Check).
func TestContentValue(t *testing.T) {
	for v, want := range map[string]bool{
		`"x"`: true, `-1`: true, `0.5`: true, `7`: true, `true`: true, `false`: true, `["a","b"]`: true, `[]`: true,
		`["a",null]`: true, `null`: false, `{}`: false, `[1]`: false, `[{}]`: false, ``: false,
	} {
		if got := contentValue(json.RawMessage(v)); got != want {
			t.Errorf("contentValue(%s) = %v, want %v", v, got, want)
		}
	}
}
