package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestCompileForm_RefusesWhatItCannotCheck: an agent's requestedSchema is
// compiled from its own bytes only: a $ref to a file or URL is refused
// (the file is never read), as are schemas that are not an object schema.
func TestCompileForm_RefusesWhatItCannotCheck(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(secret, []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{
		`{"type":"object","properties":{"a":{"$ref":"file://` + secret + `"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`,
		`{"type":"array"}`,
		`{"type":"object","properties":[]}`,
		`{"type":"object","required":"a"}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"properties":{}}`,
		`{"type":"object","properties":{"a":{"type":"nonsense"}}}`,
	} {
		if f, why := compileForm(json.RawMessage(raw)); f != nil || why == "" {
			t.Errorf("compileForm(%s) accepted", raw)
		}
	}
}

// TestCheckElicitAnswer: the host's answer against the requested schema:
// each refusal names the first bad member (data.field); a match passes
// the content on.
func TestCheckElicitAnswer(t *testing.T) {
	f, why := compileForm(json.RawMessage(`{"type":"object","properties":{
		"strategy":{"type":"string","enum":["a","b"]},
		"count":{"type":"integer","minimum":1,"maximum":9},
		"tags":{"type":"array","items":{"type":"string","enum":["x","y"]},"maxItems":2},
		"name":{"type":"string","maxLength":3,"pattern":"^[a-z]+$"},
		"ok":{"type":"boolean"}},"required":["strategy"]}`))
	if f == nil {
		t.Fatal(why)
	}
	pe := &Elicit{Mode: "form", Form: f}
	for _, c := range []struct {
		res   protocol.ElicitationResult
		field string // "" = accepted
	}{
		{protocol.ElicitationResult{Action: "accept", Content: json.RawMessage(`{"strategy":"a","count":3,"tags":["x"],"name":"abc","ok":true}`)}, ""},
		{protocol.ElicitationResult{Action: "decline", Content: json.RawMessage(`{"junk":1}`)}, ""},
		{protocol.ElicitationResult{Action: "cancel"}, ""},
		{protocol.ElicitationResult{Action: "maybe"}, "action"},
		{protocol.ElicitationResult{Action: "accept"}, "content"},
		{protocol.ElicitationResult{Action: "accept", Content: json.RawMessage(`{"strategy":"c"}`)}, "content.strategy"},
		{protocol.ElicitationResult{Action: "accept", Content: json.RawMessage(`{"strategy":"a","count":0}`)}, "content.count"},
		{protocol.ElicitationResult{Action: "accept", Content: json.RawMessage(`{"strategy":"a","count":1.5}`)}, "content.count"},
		{protocol.ElicitationResult{Action: "accept", Content: json.RawMessage(`{"strategy":"a","tags":["x","y","x"]}`)}, "content.tags"},
		{protocol.ElicitationResult{Action: "accept", Content: json.RawMessage(`{"strategy":"a","name":"ABC"}`)}, "content.name"},
		{protocol.ElicitationResult{Action: "accept", Content: json.RawMessage(`{"strategy":"a","ok":{}}`)}, "content.ok"},
		{protocol.ElicitationResult{Action: "accept", Content: json.RawMessage(`{"strategy":"a","other":"x"}`)}, "content.other"},
		{protocol.ElicitationResult{Action: "accept", Content: json.RawMessage(`{"strategy":"a","strategy":"b"}`)}, "content"},
		{protocol.ElicitationResult{Action: "accept", Content: json.RawMessage(`["a"]`)}, "content"},
	} {
		ans, herr := CheckElicitAnswer(pe, c.res)
		switch {
		case c.field == "" && herr != nil:
			t.Errorf("%s %s refused: %v", c.res.Action, c.res.Content, herr)
		case c.field == "" && (ans.Action != c.res.Action || c.res.Action != "accept" && ans.Content != nil):
			t.Errorf("%s %s answered %+v", c.res.Action, c.res.Content, ans)
		case c.field != "" && (herr == nil || herr.RPCCode != protocol.CodeInvalidParams || herr.Data.Field != c.field):
			t.Errorf("%s %s: %+v, want -32602 field %s", c.res.Action, c.res.Content, herr, c.field)
		}
	}
}

// TestFormCheck_FirstBadMemberInWireOrder: with several members that are
// not properties, the one reported is the first the host wrote, every
// time (not a map's order).
func TestFormCheck_FirstBadMemberInWireOrder(t *testing.T) {
	f, why := compileForm(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`))
	if why != "" {
		t.Fatal(why)
	}
	for i := 0; i < 50; i++ {
		if field, _ := f.Check(json.RawMessage(`{"x":"1","y":"2","z":"3"}`)); field != "content.x" {
			t.Fatalf("run %d: field %q, want content.x (the first written)", i, field)
		}
	}
}
