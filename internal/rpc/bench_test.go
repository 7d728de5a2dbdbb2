package rpc

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// BenchmarkFrameStreamRead measures reading NDJSON frames of a typical
// request size (ns and bytes allocated per frame).
func BenchmarkFrameStreamRead(b *testing.B) {
	line := `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"session":"s-0123456789abcdef","requestId":"t1","prompt":"` +
		strings.Repeat("x", 200) + `"}}` + "\n"
	input := []byte(strings.Repeat(line, b.N))
	st := NewFrameStream(bytes.NewReader(input), io.Discard, nil, FramingNDJSON, DefaultMaxFrameBytes)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var v map[string]any
		if err := st.ReadObject(&v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFrameStreamWrite measures writing one session/update-sized
// notification frame.
func BenchmarkFrameStreamWrite(b *testing.B) {
	st := NewFrameStream(strings.NewReader(""), io.Discard, nil, FramingNDJSON, DefaultMaxFrameBytes)
	msg := map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{
		"session": "s-0123456789abcdef", "requestId": "t1", "seq": 42,
		"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": strings.Repeat("y", 200)}}}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := st.WriteObject(msg); err != nil {
			b.Fatal(err)
		}
	}
}
