package session

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/policy"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// FuzzProviderLines feeds arbitrary provider stdout to the ACP client
// side (docs/architecture.md "ACP client side": internal/jsonl lines,
// sourcegraph/jsonrpc2, internal/acpclient's handler) and runs each permission
// request through the policy (policy.ParseAsk, Kind, Decide): nothing
// panics, the connection reads to the end and closes, every permission
// request gets exactly one answer, the judged kind is an ACP ToolKind and
// the decision one of approve, deny or escalate.
func FuzzProviderLines(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"x","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}` + "\n",
		`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"x","toolCall":{"toolCallId":"c","kind":"read","rawInput":{"command":"rm -rf /"}},"options":[{"optionId":"a","kind":"allow_once"}]}}` + "\n",
		`{"jsonrpc":"2.0","id":8,"method":"session/request_permission","params":{"toolCall":{"title":"Run shell"},"options":null}}` + "\nnot json\n[1]\n",
		`{"jsonrpc":"2.0","id":9,"method":"fs/read_text_file","params":{}}` + "\n" + `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n",
		`{"jsonrpc":"2.0","id":"s","method":"session/request_permission","params":{"toolCall":{"kind":"execute","rawInput":{"cmd":null}},"options":[{"optionId":1}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		asks := 0
		answered := 0
		var conn *acpclient.Conn
		conn = acpclient.NewConn(nopWriteCloser{}, io.NopCloser(bytes.NewReader(in)), 1<<16, zap.NewNop(), func(ev acpclient.Event) bool {
			switch {
			case ev.Permission != nil:
				asks++
				pa, _ := policy.ParseAsk(ev.Permission.Params)
				head, opts := pa.Head, pa.Opts
				kind := policy.Kind(head)
				if !protocol.ToolKinds[kind] {
					t.Fatalf("judged kind %q is not an ACP ToolKind", kind)
				}
				for _, mode := range []string{"approve-all", "approve-reads", "deny-all"} {
					if a, _ := policy.Decide(protocol.OpenParams{PermissionMode: mode}, kind); a != "approve" && a != "deny" && a != "escalate" {
						t.Fatalf("decision %q", a)
					}
				}
				_ = policy.PickOption(opts, "allow_once", "allow_always")
				ev.Permission.Answer(acp.NewRequestPermissionOutcomeCancelled())
				answered++
			case ev.Updates != nil:
				for _, u := range ev.Updates {
					var k struct {
						Kind string `json:"sessionUpdate"`
					}
					_ = json.Unmarshal(u.Update, &k)
					if !json.Valid(u.Update) || !jsonl.IsClean(u.Update) || k.Kind == "" || u.Kind != acpclient.KindOf([]byte(k.Kind)) {
						t.Fatalf("update forwarded is not clean JSON of its kind: %q (kind %v)", u.Update, u.Kind)
					}
				}
			}
			return true
		}, nil)
		select {
		case <-conn.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("the provider connection did not end at EOF")
		}
		if asks != answered {
			t.Fatalf("%d permission requests, %d answers", asks, answered)
		}
	})
}

// nopWriteCloser discards what the sidecar writes to the provider.
type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }
