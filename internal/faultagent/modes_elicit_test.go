package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestElicit_FormAskedAndAnswerReported: elicit=form sends one
// elicitation/create (mode form, the schema) per turn and reports the
// client's elicitation capabilities (null: none offered) and its answer.
func TestElicit_FormAskedAndAnswerReported(t *testing.T) {
	p := start(t, "--mode", "elicit=form")
	sid := handshake(t, p)
	var asked []message
	from := len(p.notes)
	pr := decode[promptResult](t, p.call("session/prompt", promptText(sid, "go"), func(m message) any {
		asked = append(asked, m)
		return map[string]any{"action": "accept", "content": map[string]any{"strategy": "balanced"}}
	}))
	if pr.StopReason != "end_turn" || len(asked) != 1 || asked[0].Method != "elicitation/create" ||
		!strings.Contains(string(asked[0].Params), `"mode":"form"`) || !strings.Contains(string(asked[0].Params), `"requestedSchema"`) {
		t.Fatalf("stop %q, agent asked %+v", pr.StopReason, asked)
	}
	var texts []string
	for _, u := range p.updates(from) {
		texts = append(texts, u.Update.Content.Text)
	}
	got := strings.Join(texts, "|")
	if !strings.Contains(got, "elicit caps: null|elicit: accept "+string(mustJSON(map[string]any{"strategy": "balanced"}))) {
		t.Fatalf("chunks %q", got)
	}
}

// TestElicit_ModesParse: the elicit modes' values.
func TestElicit_ModesParse(t *testing.T) {
	for _, bad := range []string{"elicit", "elicit=maybe", "elicit-withdraw=0", "permission-withdraw=x"} {
		if _, err := parseModes(bad); err == nil {
			t.Errorf("parseModes(%q) accepted", bad)
		}
	}
	c, err := parseModes("elicit=url,elicit-withdraw=5,permission-withdraw=7")
	if err != nil || c.elicit != "url" || c.elicitWithdraw.Milliseconds() != 5 || c.permissionWithdraw.Milliseconds() != 7 {
		t.Fatalf("%+v %v", c.elicitModes, err)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
