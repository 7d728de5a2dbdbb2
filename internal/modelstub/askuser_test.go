package modelstub

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

// TestAnthropic_AskLineCallsAskUserQuestion: an `ask:` line calls
// AskUserQuestion with the question and AskOptions when the request
// declares that tool, else it is plain text.
func TestAnthropic_AskLineCallsAskUserQuestion(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools []string
		kind  string
	}{
		{"declared", []string{AnthropicToolName, AnthropicAskToolName}, KindAskUser},
		{"not declared", []string{AnthropicToolName}, KindText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := New(t.Logf)
			srv := httptest.NewServer(stub)
			defer srv.Close()
			body := anthropicBody(t, tc.tools, aMsg("user", "hi\n ask: Go on? "))
			turn := decodeAnthropic(t, postSSE(t, srv.URL, "/v1/messages", body), "claude-sonnet-4-5", 1)
			if tc.kind == KindText {
				if turn.tool != nil || turn.text != HelloText {
					t.Fatalf("turn %+v, want text", turn)
				}
				return
			}
			var in struct {
				Questions []struct {
					Question string `json:"question"`
					Header   string `json:"header"`
					Options  []struct {
						Label string `json:"label"`
					} `json:"options"`
				} `json:"questions"`
			}
			if turn.tool == nil || turn.tool["name"] != AnthropicAskToolName || turn.stop != "tool_use" || json.Unmarshal([]byte(turn.input), &in) != nil ||
				len(in.Questions) != 1 || in.Questions[0].Question != "Go on?" || in.Questions[0].Header != AskHeader ||
				len(in.Questions[0].Options) != len(AskOptions) || in.Questions[0].Options[0].Label != AskOptions[0] {
				t.Fatalf("turn %+v input %s", turn, turn.input)
			}
			if st := stub.Stats(); st.ByKind[KindAskUser] != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}
