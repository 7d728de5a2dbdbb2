// Package strictjson checks a JSON document against the Go type it is about
// to be decoded into, for the two things encoding/json lets through: a
// member named twice (encoding/json keeps the last) and a member whose name
// matches a field only case-insensitively (encoding/json takes it for the
// field). Host frames are case-sensitive and name each member once
// (docs/protocol.md §3). Agent frames, read as objects rather than into a
// type, are decoded the same way by DecodeObject (object.go), which also
// refuses a case variant of a key the policy reads (docs/protocol.md §20).
//
// Members that match no field are not errors (docs/protocol.md §3: unknown
// members are ignored), but for CheckStrict, which refuses them too
// (session/open and its objects, docs/protocol.md §19). Values of a type
// with its own UnmarshalJSON (for example json.RawMessage, protocol.Sandbox)
// are not looked into: the type decides.
package strictjson

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
)

// Error is a refused document: Path is where (`params`-relative, e.g.
// "command.path" or "prompt[2].type"; empty for the top level), Reason one
// sentence without the path. Unknown: the member is no field at all
// (CheckStrict), not a field's case variant or a repeat.
type Error struct {
	// Path is where the refused member is, relative to params; "" for
	// the top level.
	Path string
	// Reason is one sentence saying what is wrong, without the path.
	Reason string
	// Unknown: the member matches no field (CheckStrict's refusal).
	Unknown bool
}

// Error implements error: "<path>: <reason>".
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// Check reports whether raw, about to be decoded into a value of v's type
// (v may be a value or a pointer), names any member twice or names a
// struct field in another case. It returns nil for valid documents and for
// anything it cannot read (invalid JSON, a type mismatch): json.Unmarshal
// reports those. Errors: *Error.
func Check(raw []byte, v any) error {
	if e := check(raw, reflect.TypeOf(v), "", false); e != nil {
		return e
	}
	return nil
}

// CheckStrict is Check, and also refuses a member that matches no field
// of the struct it is in ("unknown member"), at any depth but inside a
// map's values' own members, which may be anything (a map takes any key)
// and inside a value whose type decodes itself. Errors: *Error.
func CheckStrict(raw []byte, v any) error {
	if e := check(raw, reflect.TypeOf(v), "", true); e != nil {
		return e
	}
	return nil
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

func check(raw []byte, t reflect.Type, path string, strict bool) *Error {
	for t != nil && t.Kind() == reflect.Pointer {
		if t.Implements(unmarshaler) {
			return nil
		}
		t = t.Elem()
	}
	if t == nil || t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	raw = trim(raw)
	if len(raw) == 0 {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if raw[0] != '{' {
			return nil
		}
		return checkObject(raw, path, strict, func(key string) (reflect.Type, string) {
			return fieldsOf(t).lookup(key)
		})
	case reflect.Map:
		if raw[0] != '{' {
			return nil
		}
		elem := t.Elem()
		return checkObject(raw, path, false, func(string) (reflect.Type, string) { return elem, "" })
	case reflect.Slice, reflect.Array:
		if raw[0] != '[' {
			return nil
		}
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return nil
		}
		for i, el := range elems {
			if e := check(el, t.Elem(), path+"["+strconv.Itoa(i)+"]", strict); e != nil {
				return e
			}
		}
	}
	return nil
}

// checkObject walks one object's members: lookup gives a member's value
// type (nil: not a field) or, for a case variant, the field's real name.
// unknown: a member that is no field is an error (a struct under
// CheckStrict).
func checkObject(raw []byte, path string, unknown bool, lookup func(string) (reflect.Type, string)) *Error {
	var err *Error
	seen := make(map[string]bool)
	jsonl.Members(raw, func(k []byte, escaped bool, val []byte) {
		if err != nil {
			return
		}
		key := jsonl.MemberName(k, escaped)
		at := join(path, key)
		if seen[key] {
			err = &Error{Path: at, Reason: "member " + strconv.Quote(key) + " occurs twice"}
			return
		}
		seen[key] = true
		ft, want := lookup(key)
		if want != "" {
			err = &Error{Path: at, Reason: "unknown member " + strconv.Quote(key) + "; member names are case-sensitive: did you mean " + strconv.Quote(want) + "?"}
			return
		}
		if ft == nil && unknown {
			err = &Error{Path: at, Reason: "unknown member " + strconv.Quote(key), Unknown: true}
			return
		}
		if ft != nil {
			err = check(val, ft, at, unknown)
		}
	})
	return err
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func trim(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// fields is a struct type's JSON member names (tags, embedded structs
// flattened): exact name → value type, and lower-cased name → exact name.
type fields struct {
	exact map[string]reflect.Type
	fold  map[string]string
}

func (f *fields) lookup(key string) (reflect.Type, string) {
	if t, ok := f.exact[key]; ok {
		return t, ""
	}
	if name, ok := f.fold[strings.ToLower(key)]; ok {
		return nil, name
	}
	return nil, ""
}

var cache sync.Map // reflect.Type → *fields

func fieldsOf(t reflect.Type) *fields {
	if f, ok := cache.Load(t); ok {
		return f.(*fields)
	}
	f := &fields{exact: map[string]reflect.Type{}, fold: map[string]string{}}
	addFields(f, t, 0)
	cache.Store(t, f)
	return f
}

func addFields(f *fields, t reflect.Type, depth int) {
	if depth > 8 {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				addFields(f, et, depth+1)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := f.exact[name]; !dup {
			f.exact[name] = sf.Type
			f.fold[strings.ToLower(name)] = name
		}
	}
}
