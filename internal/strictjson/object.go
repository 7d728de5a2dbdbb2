package strictjson

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Agent frames are decoded strictly where the policy or the host depends
// on them (docs/protocol.md, "Threat model"): ACP keys are case-sensitive
// (encoding/json matches struct fields case-insensitively and merges a
// repeated object into a map, so an agent could hide a member from one
// reader and show it to another), and an object that names a member twice
// is refused — a host in JavaScript takes the last, Go the last, other
// decoders the first.

// Member is one member of a JSON object: Key decoded (escapes resolved)
// and Val its raw value, a subslice of the object's bytes.
type Member struct {
	// Key is the member's name, escapes decoded.
	Key string
	// Val is the member's raw JSON value.
	Val json.RawMessage
}

// ErrDuplicateKey is ObjectMembers' error for a key that occurs twice.
var ErrDuplicateKey = errors.New("a member name occurs twice")

// ErrNotObject is ObjectMembers' error for a value that is not an object.
var ErrNotObject = errors.New("not a JSON object")

// ObjectMembers decodes raw, one JSON object, into its members in order
// (values are subslices of raw; jsonl.Members, one pass). Errors:
// ErrNotObject (also for invalid JSON), ErrDuplicateKey (exact key, after
// decoding escapes).
func ObjectMembers(raw json.RawMessage) ([]Member, error) {
	var out []Member
	dup := false
	ok := jsonl.Members(raw, func(k []byte, escaped bool, v []byte) {
		key := jsonl.MemberName(k, escaped)
		for _, m := range out {
			if m.Key == key {
				dup = true
			}
		}
		out = append(out, Member{Key: key, Val: v})
	})
	switch {
	case !ok:
		return nil, ErrNotObject
	case dup:
		return nil, ErrDuplicateKey
	}
	return out, nil
}

// Object is one strictly decoded JSON object: its members' raw values by
// exact key.
type Object map[string]json.RawMessage

// DecodeObject decodes raw into an Object, refusing duplicate keys and —
// when policyKeys are given — a key that differs from one of them only by
// case (an ACP key is case-sensitive; a reader that is not would take it
// for the policy's member). why is "" on success, else the reason the
// object is malformed: "a member name occurs twice", "not a JSON object"
// or "member \"K\" differs from \"k\" only by case".
func DecodeObject(raw json.RawMessage, policyKeys ...string) (obj Object, why string) {
	ms, err := ObjectMembers(raw)
	switch {
	case errors.Is(err, ErrDuplicateKey):
		return nil, "a member name occurs twice"
	case err != nil:
		return nil, "not a JSON object"
	}
	obj = make(Object, len(ms))
	for _, m := range ms {
		for _, k := range policyKeys {
			if m.Key != k && strings.EqualFold(m.Key, k) {
				return nil, "member " + protocol.QuoteShort(m.Key) + " differs from " + protocol.QuoteShort(k) + " only by case"
			}
		}
		obj[m.Key] = m.Val
	}
	return obj, ""
}

// Str returns member key as a string: present false when the member is
// absent or null (ok true then); ok false when present and not a JSON
// string.
func (o Object) Str(key string) (v string, present, ok bool) {
	raw, has := o[key]
	if !has || string(raw) == "null" {
		return "", false, true
	}
	if json.Unmarshal(raw, &v) != nil || len(raw) == 0 || raw[0] != '"' {
		return "", true, false
	}
	return v, true, true
}
