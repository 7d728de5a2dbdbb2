package wirecheck

import (
	"errors"
	"strings"
	"testing"
)

func mustSchema(t *testing.T) *Schema {
	t.Helper()
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCheck_PairsResponsesWithRequests: a result is validated against the
// result of the method its id names; a sidecar frame outside the schema is
// a violation.
func TestCheck_PairsResponsesWithRequests(t *testing.T) {
	c := mustSchema(t).NewConn()
	ok := func(from From, f string) {
		t.Helper()
		if err := c.Check(from, []byte(f)); err != nil {
			t.Errorf("%s frame %s: %v", from, f, err)
		}
	}
	bad := func(from From, f, want string) {
		t.Helper()
		err := c.Check(from, []byte(f))
		var v *Violation
		if !errors.As(err, &v) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s frame %s: got %v, want a violation mentioning %q", from, f, err, want)
		}
	}
	ok(FromHost, `{"jsonrpc":"2.0","id":1,"method":"session/cancel","params":{"session":"s-1"}}`)
	ok(FromSidecar, `{"jsonrpc":"2.0","id":1,"result":{"cancelled":true}}`)
	ok(FromHost, `{"jsonrpc":"2.0","id":2,"method":"session/cancel","params":{"session":"s-1"}}`)
	bad(FromSidecar, `{"jsonrpc":"2.0","id":2,"result":{"cancelled":"yes"}}`, "CancelResult")
	bad(FromSidecar, `{"jsonrpc":"2.0","id":3,"result":{}}`, "no pending host request")
	// Extra members of a closed shape are drift.
	ok(FromHost, `{"jsonrpc":"2.0","id":"x","method":"session/cancel","params":{"session":"s-1"}}`)
	bad(FromSidecar, `{"jsonrpc":"2.0","id":"x","result":{"cancelled":true,"extra":1}}`, "additional")
	// Errors carry a DataCode matching the numeric code.
	ok(FromHost, `{"jsonrpc":"2.0","id":4,"method":"session/status","params":{"session":"s-1"}}`)
	bad(FromSidecar, `{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"m","data":{"code":"SESSION_NOT_FOUND","retryable":false}}}`, "ErrorObject")
	ok(FromHost, `{"jsonrpc":"2.0","id":5,"method":"session/status","params":{"session":"s-1"}}`)
	ok(FromSidecar, `{"jsonrpc":"2.0","id":5,"error":{"code":-32000,"message":"m","data":{"code":"SESSION_NOT_FOUND","retryable":false}}}`)
	// Notifications by method.
	ok(FromSidecar, `{"jsonrpc":"2.0","method":"session/update","params":{"session":"s-1","requestId":null,"seq":1,"update":{"sessionUpdate":"plan","x":1}}}`)
	bad(FromSidecar, `{"jsonrpc":"2.0","method":"session/update","params":{"session":"s-1","requestId":null,"seq":0,"update":{"sessionUpdate":"plan"}}}`, "UpdateNotification")
	bad(FromSidecar, `{"jsonrpc":"2.0","method":"session/nope","params":{}}`, "not a")
	// A host request the schema rejects must be refused.
	ok(FromHost, `{"jsonrpc":"2.0","id":6,"method":"session/open","params":{"sessionKey":"k"}}`)
	ok(FromSidecar, `{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"m","data":{"code":"INVALID_PARAMS","retryable":false,"field":"agent"}}}`)
	ok(FromHost, `{"jsonrpc":"2.0","id":7,"method":"session/open","params":{"sessionKey":"k"}}`)
	bad(FromSidecar, `{"jsonrpc":"2.0","id":7,"result":{}}`, "schema rejects")
	// Sidecar → host requests and the host's answers.
	ok(FromSidecar, `{"jsonrpc":"2.0","id":0,"method":"session/requestPermission","params":{"session":"s-1","requestId":"t1","toolCall":{"toolCallId":"c"},"options":[{"optionId":"a","name":"A","kind":"allow_once"}],"kind":"edit","rule":"r"}}`)
	bad(FromHost, `{"jsonrpc":"2.0","id":0,"result":{"outcome":"selected"}}`, "RequestPermissionResult")
	// Unreadable frames get id null errors.
	ok(FromHost, `{bad json`)
	ok(FromSidecar, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error","data":{"code":"PARSE_ERROR","retryable":false}}}`)
	bad(FromSidecar, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`, "ErrorObject")
	bad(FromSidecar, `not json`, "not a JSON object")
}

// TestSchema_MethodsNameDefinitions: every x-methods entry names its
// params and result definitions by the documented convention.
func TestSchema_MethodsNameDefinitions(t *testing.T) {
	for _, m := range mustSchema(t).Methods() {
		if m.Kind == "request" && (m.Params == "" || m.Result == "") {
			t.Errorf("request %s lacks params or result", m.Name)
		}
		if m.Kind == "notification" && m.Result != "" {
			t.Errorf("notification %s has a result", m.Name)
		}
		if m.Kind == "request" && !strings.HasSuffix(m.Params, "Params") {
			t.Errorf("%s params %s: want a name ending in Params", m.Name, m.Params)
		}
		if m.Kind == "notification" && m.Params != "" && !strings.HasSuffix(m.Params, "Notification") {
			t.Errorf("%s params %s: want a name ending in Notification", m.Name, m.Params)
		}
	}
}
