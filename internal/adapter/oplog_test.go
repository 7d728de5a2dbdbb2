package adapter

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestLog_OneInfoLinePerSessionOpenedEndedOrFailed (docs/operations.md,
// "Logs"): at info, a session that opens logs "session opened" and, once
// closed, "session ended"; an open the agent refuses logs "session open
// failed" with its code; no line carries the open's env value.
func TestLog_OneInfoLinePerSessionOpenedEndedOrFailed(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	const secret = "sk-oplog-SECRET-4242"
	open := func(m *Manager, key string) outcome {
		p := fakeOpen(t, key)
		p.Env = map[string]string{"OPENAI_API_KEY": secret}
		return wait(t, start(func(r session.Reply) { m.Open(context.Background(), p, r) }))
	}

	agent := newFakeAgent()
	m := fakeManager(t, &fakeLauncher{agent: agent}, newRecHost())
	m.sh.Log = zap.New(core)
	o := open(m, "oplog")
	if o.err != nil {
		t.Fatal(o.err)
	}
	id := o.v.(protocol.OpenResult).Session
	if c := wait(t, start(func(r session.Reply) { m.Close(protocol.CloseParams{Session: id, Reason: "done"}, r) })); c.err != nil {
		t.Fatal(c.err)
	}

	refusing := newFakeAgent()
	refusing.set("session/new", func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) {
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: "no " + secret}
	})
	m2 := fakeManager(t, &fakeLauncher{agent: refusing}, newRecHost())
	m2.sh.Log = zap.New(core)
	if o := open(m2, "oplog-fails"); o.err == nil {
		t.Fatal("the open the agent refused succeeded")
	}
	m.Shutdown()
	m.Wait()
	m2.Shutdown()
	m2.Wait()

	count := map[string]int{}
	for _, e := range logs.All() {
		count[e.Message]++
		line, _ := json.Marshal(e.ContextMap())
		if strings.Contains(e.Message+string(line), secret) {
			t.Errorf("log line %q %s carries the env value", e.Message, line)
		}
		if e.Message == "session open failed" {
			if code, _ := e.ContextMap()["code"].(string); code == "" {
				t.Errorf("session open failed without a code: %v", e.ContextMap())
			}
		}
	}
	if count["session opened"] != 1 || count["session ended"] != 1 || count["session open failed"] != 1 {
		t.Errorf("info lines %v, want one each of session opened, session ended, session open failed", count)
	}
}
