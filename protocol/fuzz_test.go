package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzOpenParams decodes arbitrary session/open params as internal/rpc
// does and validates them (docs/protocol.md §8 session/open, §18): it
// never panics; the answer does not depend on the env values (only on
// whether one holds a NUL), so no value can leak into an error; the same
// params always give the same first bad field; and params that pass
// validate again unchanged, with the defaults filled.
func FuzzOpenParams(f *testing.F) {
	for _, s := range []string{
		`{"sessionKey":"k","agent":"generic","command":{"path":"/bin/true"},"cwd":"/tmp"}`,
		`{"sessionKey":"k","agent":"codex","command":{"path":"/x","args":["a\u0000"],"sha256":"00"},"cwd":"/","env":{"A":"sk-secret-1","B":"x\u0000y","C=D":"v"}}`,
		`{"sessionKey":"k","agent":"a","command":{"path":"/x"},"cwd":"/","env":{"K1":"a\u0000","K2":"b\u0000","K3":"c\u0000"}}`,
		`{"sessionKey":"k","agent":"a","command":{"path":"/x"},"cwd":"/","permissionPolicy":{"autoApprove":["nope"],"autoDeny":["bad"],"escalate":["worse"]}}`,
		`{"sessionKey":"k","agent":"a","command":{"path":"/x"},"cwd":"/","limits":{"memoryBytes":1,"pids":-1,"cpuPercent":0},"inheritEnv":["","A=B"],"permissionTimeoutMs":0}`,
		`{"sessionKey":"k","agent":"a","command":{"path":"/x"},"cwd":"/","handshakeTimeoutMs":600001,"mcpServers":[1,{}],"permissionMode":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var p OpenParams
		if json.Unmarshal(raw, &p) != nil {
			return
		}
		q := cloneOpen(t, p, "first")
		r := cloneOpen(t, p, "other-value-of-another-length")
		e1, e2, e3 := p.Validate(), q.Validate(), r.Validate()
		if (e1 == nil) != (e2 == nil) || (e1 == nil) != (e3 == nil) {
			t.Fatalf("validity depends on env values or repeats: %v / %v / %v", e1, e2, e3)
		}
		if e1 != nil {
			if e1.Message != e2.Message || e1.Data.Field != e2.Data.Field || e2.Message != e3.Message || e2.Data.Field != e3.Data.Field {
				t.Fatalf("errors differ: %q %q / %q %q / %q %q", e1.Message, e1.Data.Field, e2.Message, e2.Data.Field, e3.Message, e3.Data.Field)
			}
			return
		}
		before, _ := json.Marshal(p)
		e := p.Validate()
		after, _ := json.Marshal(p)
		if e != nil || !bytes.Equal(before, after) {
			t.Fatalf("second Validate: %v, params %s became %s", e, before, after)
		}
		if p.PermissionMode == "" || p.NonInteractivePermissions == "" {
			t.Fatalf("defaults not filled: %+v", p)
		}
	})
}

// cloneOpen deep-copies p; with a non-empty value every env value is
// replaced by it, keeping whether the original held a NUL.
func cloneOpen(t *testing.T, p OpenParams, value string) OpenParams {
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q OpenParams
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if value != "" {
		for k, v := range q.Env {
			if strings.IndexByte(v, 0) >= 0 {
				q.Env[k] = value + "\x00"
			} else {
				q.Env[k] = value
			}
		}
	}
	return q
}
