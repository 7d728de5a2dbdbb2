package strictjson

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestDecodeObject: an object is decoded member by exact key; a member
// named twice (also through an escape), a value that is not an object,
// and a case variant of a policy key are refused with their reason.
func TestDecodeObject(t *testing.T) {
	for _, c := range []struct {
		raw  string
		keys []string
		why  string // "" = decoded
		n    int
	}{
		{`{"a":1,"b":{"c":2}}`, nil, "", 2},
		{` {"kind":"read","Other":1} `, []string{"kind"}, "", 2},
		{`{}`, []string{"kind"}, "", 0},
		{`{"a":1,"a":2}`, nil, "a member name occurs twice", 0},
		{`{"kind":1,"kin\u0064":2}`, nil, "a member name occurs twice", 0},
		{`{"Kind":"read"}`, []string{"kind"}, `member "Kind" differs from "kind" only by case`, 0},
		{`{"KIND":"read"}`, []string{"title", "kind"}, `member "KIND" differs from "kind" only by case`, 0},
		{`[1]`, nil, "not a JSON object", 0},
		{`{"a":`, nil, "not a JSON object", 0},
		{`null`, nil, "not a JSON object", 0},
	} {
		obj, why := DecodeObject(json.RawMessage(c.raw), c.keys...)
		if why != c.why || len(obj) != c.n || (why == "") != (obj != nil) {
			t.Errorf("DecodeObject(%s, %v) = %v, %q; want %d members, %q", c.raw, c.keys, obj, why, c.n, c.why)
		}
	}
	obj, _ := DecodeObject(json.RawMessage(`{"b":{"c":2},"s":"x"}`))
	if string(obj["b"]) != `{"c":2}` || string(obj["s"]) != `"x"` {
		t.Errorf("values %q %q: want the raw bytes", obj["b"], obj["s"])
	}
}

// TestObject_Str: a string member is read; absent and null are absent;
// anything else is present and not a string.
func TestObject_Str(t *testing.T) {
	obj, why := DecodeObject(json.RawMessage(`{"s":"x\u0041","e":"","n":null,"i":5,"o":{},"a":["x"]}`))
	if why != "" {
		t.Fatal(why)
	}
	for _, c := range []struct {
		key         string
		v           string
		present, ok bool
	}{
		{"s", "xA", true, true},
		{"e", "", true, true},
		{"n", "", false, true},
		{"missing", "", false, true},
		{"i", "", true, false},
		{"o", "", true, false},
		{"a", "", true, false},
	} {
		if v, present, ok := obj.Str(c.key); v != c.v || present != c.present || ok != c.ok {
			t.Errorf("Str(%s) = %q, %v, %v; want %q, %v, %v", c.key, v, present, ok, c.v, c.present, c.ok)
		}
	}
}

// TestObjectMembers: members come in order with escapes resolved; a
// repeated key and a non-object are the package's errors.
func TestObjectMembers(t *testing.T) {
	ms, err := ObjectMembers(json.RawMessage(`{"b":1,"\u0061":[2]}`))
	if err != nil || len(ms) != 2 || ms[0].Key != "b" || string(ms[0].Val) != "1" || ms[1].Key != "a" || string(ms[1].Val) != "[2]" {
		t.Fatalf("%+v %v", ms, err)
	}
	if _, err := ObjectMembers(json.RawMessage(`{"a":1,"a":1}`)); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := ObjectMembers(json.RawMessage(`"a"`)); !errors.Is(err, ErrNotObject) {
		t.Errorf("not an object: %v", err)
	}
}
