package jsonl

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"testing"
)

// TestScan_EnvelopeMembersAreSubslices: the envelope and params members
// are the frame's own bytes, white space and key order as sent.
func TestScan_EnvelopeMembersAreSubslices(t *testing.T) {
	frame := []byte(` {"params": {"update" : {"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a\"<b>"}}, "sessionId":"s1"},"jsonrpc":"2.0","method":"session/update"} `)
	var e Envelope
	if !Scan(frame, &e) {
		t.Fatal("valid frame refused")
	}
	if string(e.JSONRPC) != `"2.0"` || string(e.Method) != `"session/update"` || e.ID != nil || e.Result != nil {
		t.Fatalf("envelope %+v", e)
	}
	up := e.Param("update")
	if want := `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a\"<b>"}}`; string(up) != want {
		t.Fatalf("update %s, want %s", up, want)
	}
	if !bytes.Contains(frame, up) || &up[0] != &frame[bytes.Index(frame, up)] {
		t.Fatal("update is not a subslice of the frame")
	}
	if sid, ok := StringValue(e.Param("sessionId")); !ok || string(sid) != "s1" {
		t.Fatalf("sessionId %q %v", sid, ok)
	}
	if !e.Plain() || e.Param("missing") != nil {
		t.Fatal("plain envelope misreported")
	}
}

// TestScan_EscapedKeyOrManyParamsIsNotPlain: lookups that could be wrong
// are flagged, so the caller decodes instead.
func TestScan_EscapedKeyOrManyParamsIsNotPlain(t *testing.T) {
	var e Envelope
	if !Scan([]byte(`{"jsonrpc":"2.0","method":"m","params":{"upd\u0061te":1}}`), &e) || e.Plain() {
		t.Fatal("escaped params key not flagged")
	}
	if !Scan([]byte(`{"jsonrpc":"2.0","method":"m","params":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}}`), &e) || e.Plain() {
		t.Fatal("nine params members not flagged")
	}
}

// TestScan_AgreesWithEncodingJSON: Scan accepts exactly what json.Valid
// accepts, for objects: a fixed list and random mutations of it.
func TestScan_AgreesWithEncodingJSON(t *testing.T) {
	seeds := []string{
		`{}`, `{"a":1}`, `{"a":[1,2,{"b":null}],"c":"\u00e9\n","d":-0.5e+3,"e":true,"f":false}`,
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":"\x"}`, `{"a":"` + "\x01" + `"}`, `{"a":1,}`, `{,}`, `{"a"}`,
		`{"a":tru}`, `{"a":[1,]}`, `{"a":"\ud800"}`, `{"a":"` + "\xff" + `"}`, `{"a":1}x`, `{"a":1e}`, `{"a":-}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"x","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
	}
	rng := rand.New(rand.NewSource(1))
	alphabet := []byte(`{}[]":,.-+eE0123456789abcdefnrtu\ ` + "\x00\x1f\x7f\xc3\xa9")
	check := func(s []byte) {
		trimmed := bytes.TrimLeft(s, " \t\r\n")
		if len(trimmed) == 0 || trimmed[0] != '{' {
			return
		}
		var e Envelope
		if got, want := Scan(s, &e), json.Valid(s); got != want {
			t.Fatalf("Scan(%q) = %v, json.Valid = %v", s, got, want)
		}
	}
	for _, sd := range seeds {
		check([]byte(sd))
		for i := 0; i < 3000; i++ {
			b := []byte(sd)
			for k := rng.Intn(3) + 1; k > 0; k-- {
				switch p := rng.Intn(len(b) + 1); rng.Intn(3) {
				case 0:
					b = append(b[:p], append([]byte{alphabet[rng.Intn(len(alphabet))]}, b[p:]...)...)
				case 1:
					if p < len(b) {
						b = append(b[:p], b[p+1:]...)
					}
				default:
					if p < len(b) {
						b[p] = alphabet[rng.Intn(len(alphabet))]
					}
				}
			}
			check(b)
		}
	}
}

// BenchmarkScan: one session/update frame.
func BenchmarkScan(b *testing.B) {
	frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"019a-5e1c","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"flood 1234; some more text of a typical chunk"}}}}`)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	var e Envelope
	for b.Loop() {
		if !Scan(frame, &e) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkValid is encoding/json.Valid on the same frame, for scale.
func BenchmarkValid(b *testing.B) {
	frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"019a-5e1c","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"flood 1234; some more text of a typical chunk"}}}}`)
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if !json.Valid(frame) {
			b.Fatal("refused")
		}
	}
}

// TestWriteNotification_OneFrameParamsVerbatim: NDJSON and LSP frames of a
// notification carry params byte for byte and decode as JSON-RPC 2.0.
func TestWriteNotification_OneFrameParamsVerbatim(t *testing.T) {
	params := []byte(`{"a": "<b>", "n":[1, 2]}`)
	var nd bytes.Buffer
	if err := NewWriter(&nd, NDJSON).WriteNotification("session/update", params); err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","method":"session/update","params":` + string(params) + "}\n"
	if nd.String() != want {
		t.Fatalf("NDJSON %q, want %q", nd.String(), want)
	}
	var lsp bytes.Buffer
	w := NewWriter(&lsp, LSP)
	for i := 0; i < 2; i++ { // the reused buffer must not leak between frames
		if err := w.WriteNotification("m\"x", params); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&lsp, LSP, 0)
	for i := 0; i < 2; i++ {
		frame, err := r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(frame, &m); err != nil || m.JSONRPC != "2.0" || m.Method != "m\"x" || string(m.Params) != string(params) {
			t.Fatalf("LSP frame %q: %+v %v", frame, m, err)
		}
	}
}
