package acpclient

import (
	"encoding/json"
	"testing"
)

// TestDecodeUpdateParams_OnlyACPSessionUpdates: an update that is not an
// object with a non-empty string sessionUpdate is refused; a good one is
// cleaned for the host.
func TestDecodeUpdateParams_OnlyACPSessionUpdates(t *testing.T) {
	for _, bad := range []string{
		`{"sessionId":"s","update":{}}`, `{"update":{"sessionUpdate":5}}`, `{"update":{"sessionUpdate":""}}`,
		`{"update":"agent_message_chunk"}`, `{"update":[{"sessionUpdate":"plan"}]}`, `{"update":null}`, `{}`,
		`{"update":{"SessionUpdate":"plan"}}`, `{"update":{"sessionUpdate":"plan"},"update":{"sessionUpdate":"plan"}}`,
	} {
		if _, why := decodeUpdateParams(json.RawMessage(bad)); why == "" {
			t.Errorf("%s accepted", bad)
		}
	}
	u, why := decodeUpdateParams(json.RawMessage("{\"sessionId\":\"s\",\"update\":{\"sessionUpd\\u0061te\":\"plan\",\r\"x\":\"\xff\"}}"))
	if why != "" || u.Kind != KindOther || string(u.BackendSessionID) != "s" || string(u.Update) != "{\"sessionUpd\\u0061te\":\"plan\",\"x\":\"\uFFFD\"}" {
		t.Fatalf("escaped update: %v %q %q", u.Kind, u.Update, why)
	}
}
