package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParseAsk_StrictDecoding: the policy's members are read
// case-sensitively; a duplicate member, a case variant of a member the
// policy reads, a mistyped one or a repeated optionId make the ask
// malformed (docs/protocol.md §20).
func TestParseAsk_StrictDecoding(t *testing.T) {
	ok := `{"sessionId":"s","toolCall":{"toolCallId":"c","kind":"read","title":"Read a","rawInput":{"path":"a"}},"options":[{"optionId":"y","kind":"allow_once","name":"Yes"},{"optionId":"n","kind":"reject_once"}]}`
	pa, why := ParseAsk(json.RawMessage(ok))
	if why != "" || Kind(pa.Head) != "read" || len(pa.Opts) != 2 || PickKind(pa.Opts, "n") != "reject_once" {
		t.Fatalf("well-formed ask: %+v %q", pa, why)
	}
	for _, c := range []struct{ name, ask, want string }{
		{"case variant of kind", `{"toolCall":{"toolCallId":"c","Kind":"read"},"options":[]}`, "only by case"},
		{"case variant of rawInput", `{"toolCall":{"kind":"read","rawInput":{"path":"a"},"rawinput":{"command":null}},"options":[]}`, "only by case"},
		{"duplicate rawInput", `{"toolCall":{"kind":"read","rawInput":{"command":"rm -rf /"},"rawInput":{"command":null}},"options":[]}`, "occurs twice"},
		{"duplicate command", `{"toolCall":{"kind":"read","rawInput":{"command":"rm -rf /","command":null}},"options":[]}`, "occurs twice"},
		{"case variant of command", `{"toolCall":{"kind":"read","rawInput":{"Command":"rm -rf /"}},"options":[]}`, "only by case"},
		{"duplicate kind", `{"toolCall":{"kind":"execute","kind":"read"},"options":[]}`, "occurs twice"},
		{"escaped duplicate", `{"toolCall":{"kind":"execute","kin\u0064":"read"},"options":[]}`, "occurs twice"},
		{"duplicate optionId", `{"toolCall":{"kind":"edit"},"options":[{"optionId":"x","kind":"allow_always"},{"optionId":"x","kind":"reject_once"}]}`, "occurs twice"},
		{"mistyped kind", `{"toolCall":{"kind":5},"options":[]}`, "not a string"},
		{"options not an array", `{"toolCall":{"kind":"read"},"options":{}}`, "not an array"},
		{"option without id", `{"toolCall":{"kind":"read"},"options":[{"kind":"allow_once"}]}`, "optionId is not a string"},
		{"duplicate toolCall", `{"toolCall":{"kind":"execute"},"toolCall":{"kind":"read"},"options":[]}`, "occurs twice"},
		{"no toolCall", `{"options":[]}`, "no toolCall"},
	} {
		if _, why := ParseAsk(json.RawMessage(c.ask)); !strings.Contains(why, c.want) {
			t.Errorf("%s: malformed reason %q, want one containing %q", c.name, why, c.want)
		}
	}
}
