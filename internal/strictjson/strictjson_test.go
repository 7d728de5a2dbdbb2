package strictjson

import (
	"encoding/json"
	"errors"
	"testing"
)

type inner struct {
	Path string   `json:"path"`
	Args []string `json:"args,omitempty"`
}

type embedded struct {
	Meta json.RawMessage `json:"_meta,omitempty"`
}

type params struct {
	embedded
	SessionKey string            `json:"sessionKey"`
	Command    *inner            `json:"command,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Blocks     []inner           `json:"blocks,omitempty"`
	Raw        json.RawMessage   `json:"raw,omitempty"`
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		doc, path string // path "" with ok
		ok        bool
	}{
		{`{"sessionKey":"a","command":{"path":"/x"},"env":{"A":"1"},"unknown":1}`, "", true},
		{`{"SessionKey":"a"}`, "SessionKey", false},
		{`{"sessionKey":"a","sessionKey":"b"}`, "sessionKey", false},
		{`{"command":{"PATH":"/x"}}`, "command.PATH", false},
		{`{"env":{"A":"1","A":"2"}}`, "env.A", false},
		{`{"env":{"a":"1","A":"2"}}`, "", true}, // map keys are not fields
		{`{"blocks":[{"path":"/a"},{"Path":"/b"}]}`, "blocks[1].Path", false},
		{`{"raw":{"X":1,"X":2}}`, "", true}, // RawMessage: not looked into
		{`{"_META":{}}`, "_META", false},    // an embedded struct's field
		{`{"session\u004bey":"a","sessionKey":"b"}`, "sessionKey", false},
		{`not json`, "", true},               // json.Unmarshal reports it
		{`{"command":"a string"}`, "", true}, // a type mismatch: json.Unmarshal
	} {
		err := Check([]byte(c.doc), &params{})
		var se *Error
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v, want nil", c.doc, err)
		case !c.ok && !errors.As(err, &se):
			t.Errorf("%s: %v, want *Error", c.doc, err)
		case !c.ok && se.Path != c.path:
			t.Errorf("%s: path %q (%v), want %q", c.doc, se.Path, err, c.path)
		}
	}
}

// TestCheckStrict_RefusesUnknownMembersButInMapsAndSelfDecoders: a member
// that is no field of its struct is refused at any depth (in a slice's
// elements too), named by its path; a map's keys and a value whose type
// decodes itself (json.RawMessage) are free; Check still ignores it.
func TestCheckStrict_RefusesUnknownMembersButInMapsAndSelfDecoders(t *testing.T) {
	type inner struct {
		MemoryBytes int `json:"memoryBytes"`
	}
	type doc struct {
		Mode   string            `json:"permissionMode"`
		Limits *inner            `json:"limits"`
		List   []inner           `json:"list"`
		Env    map[string]string `json:"env"`
		Meta   json.RawMessage   `json:"_meta"`
	}
	ok := `{"permissionMode":"x","limits":{"memoryBytes":1},"env":{"ANY":"v"},"_meta":{"anything":{"goes":1}}}`
	if err := CheckStrict([]byte(ok), &doc{}); err != nil {
		t.Fatalf("valid document: %v", err)
	}
	for raw, path := range map[string]string{
		`{"permisionMode":"deny-all"}`:         "permisionMode",
		`{"limits":{"memoryMB":64}}`:           "limits.memoryMB",
		`{"list":[{"memoryBytes":1},{"x":1}]}`: "list[1].x",
	} {
		err := CheckStrict([]byte(raw), &doc{})
		var se *Error
		if !errors.As(err, &se) || se.Path != path || !se.Unknown {
			t.Errorf("%s: %v, want an unknown member at %s", raw, err, path)
		}
		if err := Check([]byte(raw), &doc{}); err != nil {
			t.Errorf("%s: Check refused an unknown member: %v", raw, err)
		}
	}
}
