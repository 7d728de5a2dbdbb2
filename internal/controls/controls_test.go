package controls

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestSetter_OptionVerifiedThroughCaller: a config option is set through
// the Caller and verified against the options the agent returns; an agent
// without the method makes it UNSUPPORTED_CONTROL.
func TestSetter_OptionVerifiedThroughCaller(t *testing.T) {
	opt := func(v string) json.RawMessage {
		return json.RawMessage(`{"id":"mode","category":"mode","type":"select","currentValue":"` + v + `","options":[{"value":"ask"},{"value":"plan"}]}`)
	}
	var method string
	c := &Setter{BackendSessionID: "b1", ConfigOpts: []json.RawMessage{opt("ask")},
		Modes: &protocol.Modes{CurrentModeID: "ask", AvailableModeIDs: []string{"ask", "plan"}},
		Conn: CallerFunc(func(_ context.Context, m string, _, result any) error {
			method = m
			return json.Unmarshal([]byte(`{"configOptions":[`+string(opt("plan"))+`]}`), result)
		})}
	if e := c.Set(context.Background(), KindOption, "mode", json.RawMessage(`"plan"`)); e != nil {
		t.Fatalf("set: %v", e)
	}
	if method != "session/set_config_option" || c.Modes.CurrentModeID != "plan" {
		t.Errorf("method %q, mode %q", method, c.Modes.CurrentModeID)
	}
	c.Conn = CallerFunc(func(context.Context, string, any, any) error {
		return &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: "no"}
	})
	if e := c.Set(context.Background(), KindOption, "mode", json.RawMessage(`"ask"`)); e == nil || e.Data.Code != protocol.ErrUnsupportedControl {
		t.Errorf("method not found: %v", e)
	}
}

// TestHeld_DriftFirstMovedKeyNotSettling: the first held control, by key,
// that moved and is not being set is the breach; none before arming.
func TestHeld_DriftFirstMovedKeyNotSettling(t *testing.T) {
	h := &Held{Values: map[string]string{"a": "1", "b": "1", "c": "1"}}
	now := map[string]string{"a": "1", "b": "2", "c": "2"}
	current := func(k string) (string, bool) { v, ok := now[k]; return v, ok }
	if _, _, _, ok := h.Drift(current); ok {
		t.Fatal("a drift before the controls are armed")
	}
	h.Armed = true
	h.Settle("b", 1)
	if k, want, got, ok := h.Drift(current); !ok || k != "c" || want != "1" || got != "2" {
		t.Errorf("drift = %q %q %q %v, want c 1 2", k, want, got, ok)
	}
	h.Breach = "c"
	if e := h.Refusal(); e == nil || !e.Data.Retryable {
		t.Errorf("refusal during a breach: %v", e)
	}
}

// CallerFunc adapts a function to a Caller (the tests' fake connection).
type CallerFunc func(ctx context.Context, method string, params, result any) error

// Call calls f.
func (f CallerFunc) Call(ctx context.Context, method string, params, result any) error {
	return f(ctx, method, params, result)
}
