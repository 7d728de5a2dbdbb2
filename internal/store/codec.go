package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
)

// keyShape remembers which keys a decoded JSON object had, and which of them
// were JSON null, so that re-encoding reproduces the original key set: an
// optional field that is empty is omitted only if its key was absent, and is
// written as null if it was null.
type keyShape struct {
	present map[string]bool
	null    map[string]bool
}

// objField describes one exported, JSON-tagged struct field.
type objField struct {
	name      string
	index     int
	omitEmpty bool
}

var fieldCache sync.Map // reflect.Type -> []objField

func fieldsOf(t reflect.Type) []objField {
	if v, ok := fieldCache.Load(t); ok {
		return v.([]objField)
	}
	var fs []objField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "" || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fs = append(fs, objField{name: name, index: i, omitEmpty: opts == "omitempty"})
	}
	fieldCache.Store(t, fs)
	return fs
}

func isNullJSON(raw []byte) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// decodeObject decodes a JSON object into the tagged fields of the struct v
// (which must be addressable and zero), recording the key shape and putting
// every unknown key into extra.
func decodeObject(data []byte, v reflect.Value, shape *keyShape, extra *map[string]json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	if m == nil {
		return errors.New("not a JSON object")
	}
	*shape = keyShape{present: map[string]bool{}, null: map[string]bool{}}
	for _, f := range fieldsOf(v.Type()) {
		raw, ok := m[f.name]
		if !ok {
			continue
		}
		delete(m, f.name)
		shape.present[f.name] = true
		if isNullJSON(raw) {
			shape.null[f.name] = true
			continue
		}
		if err := json.Unmarshal(raw, v.Field(f.index).Addr().Interface()); err != nil {
			return fmt.Errorf("key %q: %w", f.name, err)
		}
	}
	if len(m) > 0 {
		*extra = m
	} else {
		*extra = nil
	}
	return nil
}

type emptier interface{ isEmpty() bool }

// isEmptyValue follows encoding/json's omitempty rule, plus structs that
// implement emptier.
func isEmptyValue(v reflect.Value) bool {
	if e, ok := v.Interface().(emptier); ok {
		return e.isEmpty()
	}
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// marshalNoHTML is json.Marshal without HTML escaping (JS JSON.stringify
// writes <, > and & verbatim).
func marshalNoHTML(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// encodeObject writes the tagged fields of struct v in declaration order,
// then the extra keys (sorted) that do not collide with a field name.
func encodeObject(v reflect.Value, shape keyShape, extra map[string]json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	n := 0
	write := func(name string, val []byte) error {
		if n > 0 {
			buf.WriteByte(',')
		}
		n++
		k, err := marshalNoHTML(name)
		if err != nil {
			return err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(val)
		return nil
	}
	fields := fieldsOf(v.Type())
	known := make(map[string]bool, len(fields))
	for _, f := range fields {
		known[f.name] = true
		fv := v.Field(f.index)
		if f.omitEmpty && isEmptyValue(fv) {
			if shape.null[f.name] {
				if err := write(f.name, []byte("null")); err != nil {
					return nil, err
				}
				continue
			}
			if !shape.present[f.name] {
				continue
			}
		}
		b, err := marshalNoHTML(fv.Interface())
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", f.name, err)
		}
		if err := write(f.name, b); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if !known[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw := extra[k]
		if !json.Valid(raw) {
			return nil, fmt.Errorf("extra key %q: invalid JSON", k)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			return nil, fmt.Errorf("extra key %q: %w", k, err)
		}
		if err := write(k, c.Bytes()); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
