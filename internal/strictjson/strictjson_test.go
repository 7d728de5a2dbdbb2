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
