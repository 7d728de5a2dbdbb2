package outbox

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// jsonString encodes a requestId as a JSON string, as the session actor
// does for EmitUpdate's rid (internal/session's jsonString, notify.go).
func jsonString(v string) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestUpdateNotice_IsTheNoticeJSON: the session/update params EmitUpdate
// builds in the frame buffer decode to the same protocol.SessionUpdateNotice
// json.Marshal would give, with update byte for byte as the agent sent it.
func TestUpdateNotice_IsTheNoticeJSON(t *testing.T) {
	notice := func(rid []byte, seq uint64, up string) []byte {
		p := New(Config{Session: "s-1"})
		p.EmitUpdate(rid, seq, json.RawMessage(up))
		if len(p.out) != 1 {
			t.Fatalf("queued %d frames", len(p.out))
		}
		return p.out[0].Params
	}
	up := `{"sessionUpdate":"agent_message_chunk", "content":{"text":"<x>"}}`
	rid := "t\"1\n"
	b := notice(jsonString(rid), 42, up)
	var n protocol.SessionUpdateNotice
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if n.Session != "s-1" || n.RequestID == nil || *n.RequestID != rid || n.Seq != 42 || string(n.Update) != up {
		t.Fatalf("decoded %+v from %s", n, b)
	}
	if !bytes.HasSuffix(b, []byte(`"update":`+up+`}`)) {
		t.Fatalf("update not verbatim: %s", b)
	}
	if b := notice([]byte("null"), 1, `{}`); string(b) != `{"session":"s-1","requestId":null,"seq":1,"update":{}}` {
		t.Fatalf("outside a turn: %s", b)
	}
}
