package acpclient

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
)

// Agent frames are decoded strictly where the policy or the host depends
// on them (docs/protocol.md, "Threat model"): ACP keys are case-sensitive
// (encoding/json matches struct fields case-insensitively and merges a
// repeated object into a map, so an agent could hide a member from one
// reader and show it to another), and an object that names a member twice
// is refused — a host in JavaScript takes the last, Go the last, other
// decoders the first.

// member is one member of a JSON object: its key decoded (escapes
// resolved) and its raw value.
type member struct {
	key string
	val json.RawMessage
}

// errDuplicateKey is objectMembers' error for a key that occurs twice.
var errDuplicateKey = errors.New("a member name occurs twice")

// errNotObject is objectMembers' error for a value that is not an object.
var errNotObject = errors.New("not a JSON object")

// objectMembers decodes raw, one JSON object, into its members in order
// (values are subslices of raw; jsonl.Members, one pass). Errors:
// errNotObject (also for invalid JSON), errDuplicateKey (exact key, after
// decoding escapes).
func objectMembers(raw json.RawMessage) ([]member, error) {
	var out []member
	dup := false
	ok := jsonl.Members(raw, func(k []byte, escaped bool, v []byte) {
		key := jsonl.MemberName(k, escaped)
		for _, m := range out {
			if m.key == key {
				dup = true
			}
		}
		out = append(out, member{key: key, val: v})
	})
	switch {
	case !ok:
		return nil, errNotObject
	case dup:
		return nil, errDuplicateKey
	}
	return out, nil
}

// StrictObject is one decoded object: its members' raw values by exact
// key (escapes in keys resolved).
type StrictObject map[string]json.RawMessage

// DecodeStrict decodes raw, one JSON object, into a StrictObject,
// refusing duplicate keys and — when policyKeys are given — a key that
// differs from one of them only by case (an ACP key is case-sensitive; a
// reader that is not would take it for the policy's member;
// docs/protocol.md §20). why is "" on success, else the reason the object
// is malformed: "a member name occurs twice", "not a JSON object" (also
// for invalid JSON) or `member "K" differs from "k" only by case`.
func DecodeStrict(raw json.RawMessage, policyKeys ...string) (obj StrictObject, why string) {
	ms, err := objectMembers(raw)
	switch {
	case errors.Is(err, errDuplicateKey):
		return nil, "a member name occurs twice"
	case err != nil:
		return nil, "not a JSON object"
	}
	obj = make(StrictObject, len(ms))
	for _, m := range ms {
		for _, k := range policyKeys {
			if m.key != k && strings.EqualFold(m.key, k) {
				return nil, "member " + QuoteShort(m.key) + " differs from " + QuoteShort(k) + " only by case"
			}
		}
		obj[m.key] = m.val
	}
	return obj, ""
}

// Str returns member key as a string: present false when absent or
// null, ok false when present and not a string.
func (o StrictObject) Str(key string) (v string, present, ok bool) {
	raw, has := o[key]
	if !has || string(raw) == "null" {
		return "", false, true
	}
	if json.Unmarshal(raw, &v) != nil || len(raw) == 0 || raw[0] != '"' {
		return "", true, false
	}
	return v, true, true
}

// decodeUpdateParams decodes ACP session/update params strictly — an
// object with an optional string sessionId and an update that is an ACP
// SessionUpdate: an object whose sessionUpdate is a non-empty string —
// and cleans the update for the host (jsonl.CleanRaw). why says what is
// wrong, "" when nothing is.
func decodeUpdateParams(params json.RawMessage) (u Update, why string) {
	p, why := DecodeStrict(params)
	if why != "" {
		return u, "params: " + why
	}
	sid, present, ok := p.Str("sessionId")
	if !ok {
		return u, "sessionId is not a string"
	}
	if present {
		u.BackendSessionID = []byte(sid)
	}
	raw, has := p["update"]
	if !has {
		return u, "no update"
	}
	up, why := DecodeStrict(raw)
	if why != "" {
		return u, "update: " + why
	}
	kind, _, ok := up.Str("sessionUpdate")
	if !ok || kind == "" {
		return u, "update has no non-empty string sessionUpdate"
	}
	u.Kind, u.Update = KindOf([]byte(kind)), jsonl.CleanRaw(raw)
	return u, ""
}
