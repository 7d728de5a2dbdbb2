package jsonl

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestScan_FlagsWhatAHostMustNotGetVerbatim: invalid UTF-8 in a string or
// a tab/CR/LF between tokens marks the frame; valid multi-byte text and
// plain spaces do not (docs/protocol.md §20: host frames are valid NDJSON).
func TestScan_FlagsWhatAHostMustNotGetVerbatim(t *testing.T) {
	for _, c := range []struct {
		frame string
		dirty bool
	}{
		{`{"a":"é – 日本 🎉","b": [1, 2]}`, false},
		{`{"a":"\ufffd"}`, false},
		{"{\"a\":\"\uFFFD\"}", false},
		{"{\"a\":\"INIT-\xff\xfe\"}", true},
		{"{\"a\":\"x\xe9\"}", true},
		{"{\"a\":\"\xed\xa0\x80\"}", true}, // an encoded surrogate
		{"{\"a\":1,\r\"b\":2}", true},
		{"{\"a\":1,\t\"b\":2}", true},
		{"{\"a\":1}\r", true},
	} {
		var e Envelope
		if !Scan([]byte(c.frame), &e) {
			t.Fatalf("%q refused", c.frame)
		}
		if e.NeedsClean() != c.dirty {
			t.Errorf("%q: NeedsClean %v, want %v", c.frame, e.NeedsClean(), c.dirty)
		}
	}
}

// TestScan_UpdateKindIsTheUpdatesOwnMember: UpdateKind is
// params.update.sessionUpdate (the last one), never a nested or
// params-level member of that name.
func TestScan_UpdateKindIsTheUpdatesOwnMember(t *testing.T) {
	for _, c := range []struct{ frame, kind string }{
		{`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"plan","x":{"sessionUpdate":"no"}}}}`, `"plan"`},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionUpdate":"no","update":{"content":{"sessionUpdate":"no"}}}}`, ``},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":5}}}`, `5`},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"a","sessionUpdate":"b"}}}`, `"b"`},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"a"},"update":"s"}}`, ``},
	} {
		var e Envelope
		if !Scan([]byte(c.frame), &e) {
			t.Fatalf("%s refused", c.frame)
		}
		if string(e.UpdateKind()) != c.kind {
			t.Errorf("%s: UpdateKind %s, want %s", c.frame, e.UpdateKind(), c.kind)
		}
	}
}

// TestClean_ValidUTF8NoControlBytesSameValue: Clean's output is valid
// JSON and UTF-8 with no byte below 0x20, decodes to what encoding/json
// decodes the input to (it too replaces invalid bytes by U+FFFD), and
// leaves clean input unchanged but for white space.
func TestClean_ValidUTF8NoControlBytesSameValue(t *testing.T) {
	for _, in := range []string{
		"{\"a\":\"INIT-\xff\xfe\",\r\n\t\"b\" : [1 ,\"\\\"x\xc3\"]}",
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"é\n\\u0000"}}`,
		"\"\xe2\x82\"",
		"{\"k\xff\":null}",
	} {
		out := Clean(nil, []byte(in))
		if !json.Valid(out) || !utf8.Valid(out) || bytes.ContainsFunc(out, func(r rune) bool { return r < 0x20 }) || !IsClean(out) {
			t.Fatalf("Clean(%q) = %q: not clean JSON", in, out)
		}
		var a, b any
		if json.Unmarshal([]byte(in), &a) != nil || json.Unmarshal(out, &b) != nil {
			t.Fatalf("decode %q / %q", in, out)
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("Clean(%q) decodes to %s, want %s", in, jb, ja)
		}
	}
	clean := []byte(`{"a":"é","b":[1,2]}`)
	if !IsClean(clean) || !bytes.Equal(CleanRaw(clean), clean) {
		t.Errorf("clean input changed")
	}
}

// FuzzClean: for any JSON value Scan accepts (an object), Clean yields
// clean JSON that encoding/json decodes to the same value.
func FuzzClean(f *testing.F) {
	f.Add([]byte("{\"a\":\"\xff\",\r\"b\":1}"))
	f.Add([]byte(`{"a":[{"b":"\u00e9"}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var e Envelope
		if !Scan(in, &e) {
			return
		}
		out := Clean(nil, in)
		if !json.Valid(out) || !IsClean(out) {
			t.Fatalf("Clean(%q) = %q", in, out)
		}
		var a, b any
		if json.Unmarshal(in, &a) != nil || json.Unmarshal(out, &b) != nil {
			t.Fatalf("decode")
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Fatalf("Clean(%q) decodes to %s, want %s", in, jb, ja)
		}
	})
}

// TestMembers_AgreesWithEncodingJSON: Members yields an object's members
// in order, raw, and refuses what json.Valid refuses or is not an object.
func TestMembers_AgreesWithEncodingJSON(t *testing.T) {
	var keys []string
	var vals []string
	ok := Members([]byte(` {"a" : 1, "b\u0063":{"x":[1,2]},"a":"s"} `), func(k []byte, esc bool, v []byte) {
		keys = append(keys, string(k)+map[bool]string{true: "(esc)"}[esc])
		vals = append(vals, string(v))
	})
	if !ok || strings.Join(keys, ",") != `a,b\u0063(esc),a` || strings.Join(vals, ";") != `1;{"x":[1,2]};"s"` {
		t.Fatalf("Members: %v %q %q", ok, keys, vals)
	}
	for _, bad := range []string{`[1]`, `{"a":1,}`, `{"a":1} x`, `{"a"}`, `"s"`, `{"a":tru}`, ``} {
		if Members([]byte(bad), func([]byte, bool, []byte) {}) {
			t.Errorf("Members accepted %q", bad)
		}
	}
	if !Members([]byte(`{}`), func([]byte, bool, []byte) { t.Error("member of {}") }) {
		t.Error("{} refused")
	}
}
