package rpc

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acpx-sidecar/acpx-sidecar/internal/strictjson"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// objectOrAbsent reports whether request params are absent, null or an
// object: any other params are -32602 before the method is looked up.
func objectOrAbsent(raw *json.RawMessage) bool {
	return raw == nil || len(*raw) == 0 || (*raw)[0] == '{' || string(*raw) == "null"
}

func errParamsNotObject() *protocol.Error {
	return protocol.InvalidParams("params", "params must be an object")
}

// strictMembers is params whose unknown members are refused too
// (protocol.OpenParams: docs/protocol.md §19).
type strictMembers interface{ StrictMembers() bool }

// decode unmarshals params into v; a type mismatch names its field, and a
// member named twice or in another case than the field's is -32602
// (strictjson.Check: member names are case-sensitive, docs/protocol.md §3),
// as is, for params that say so (strictMembers), a member that is no
// field (strictjson.CheckStrict).
func decode(raw *json.RawMessage, v any) *protocol.Error {
	if raw == nil || string(*raw) == "null" {
		return nil
	}
	if len(*raw) > 0 && (*raw)[0] != '{' {
		return errParamsNotObject()
	}
	check := strictjson.Check
	if s, ok := v.(strictMembers); ok && s.StrictMembers() {
		check = strictjson.CheckStrict
	}
	if err := check(*raw, v); err != nil {
		se := err.(*strictjson.Error)
		field := se.Path
		if field == "" {
			field = "params"
		}
		msg := se.Error()
		if se.Unknown {
			msg += "; these params are read strictly (docs/protocol.md §19): put anything else in _meta"
		}
		return protocol.InvalidParams(field, msg)
	}
	if err := json.Unmarshal(*raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "params"
			}
			return protocol.InvalidParams(field, fmt.Sprintf("%s must be %s", field, jsonKind(te.Type.Kind().String())))
		}
		return protocol.InvalidParams("params", "params do not match the method's schema")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "uint64", "uint32", "uint":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "slice":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	}
	return "of another type"
}

type validator interface{ Validate() *protocol.Error }

// parse decodes and validates params into a T.
func parse[T any, PT paramsPtr[T]](raw *json.RawMessage) (T, *protocol.Error) {
	var v T
	if e := decode(raw, &v); e != nil {
		return v, e
	}
	return v, PT(&v).Validate()
}

func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func nonNil(p []*protocol.Proof) []*protocol.Proof {
	if p == nil {
		return []*protocol.Proof{}
	}
	return p
}

func nonNilList(l []protocol.ListEntry) []protocol.ListEntry {
	if l == nil {
		return []protocol.ListEntry{}
	}
	return l
}
