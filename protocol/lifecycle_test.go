package protocol

import (
	"encoding/json"
	"testing"
)

// TestValidate_Lifecycle: the string and object forms pass and read back;
// an unknown member or a member of the wrong type in the object form is
// -32602 naming lifecycle.<member> (docs/protocol.md §19, "Unknown
// members"; it was "params" — fresh-user trial).
func TestValidate_Lifecycle(t *testing.T) {
	for _, ok := range []string{`"lifecycle":"per-turn"`, `"lifecycle":"warm"`, `"lifecycle":{"mode":"warm","idleRetireMs":5}`, `"lifecycle":{"mode":"per-turn"}`} {
		if e := openWith(t, ok); e != nil {
			t.Errorf("%s: %v", ok, e)
		}
	}
	for extra, want := range map[string]string{
		`"lifecycle":{"mode":"per-turn","foo":1}`:          "lifecycle.foo",
		`"lifecycle":{"mode":"warm","idleRetireMS":5}`:     "lifecycle.idleRetireMS",
		`"lifecycle":{"mod":"per-turn"}`:                   "lifecycle.mod",
		`"lifecycle":{"mode":7}`:                           "lifecycle.mode",
		`"lifecycle":{"mode":"warm","idleRetireMs":"5"}`:   "lifecycle.idleRetireMs",
		`"lifecycle":{"mode":"per-turn","idleRetireMs":5}`: "lifecycle.idleRetireMs",
		`"lifecycle":"sometimes"`:                          "lifecycle.mode",
	} {
		e := openWith(t, extra)
		if e == nil || e.RPCCode != CodeInvalidParams || e.Data.Field != want {
			t.Errorf("%s: %+v, want -32602 field %s", extra, e, want)
		}
	}
	b, _ := json.Marshal(Lifecycle{Mode: LifecycleWarm, IdleRetireMs: new(int64)})
	if string(b) != `{"mode":"warm","idleRetireMs":0}` {
		t.Errorf("marshal: %s", b)
	}
}
