package rpc

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

// syncBuf is an io.Writer whose bytes may be read while it is written.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

// FuzzServer_HostFrames runs the whole host side (framing, dispatch,
// params decoding and validation, lifecycle) over arbitrary stdin bytes
// against the echoing fake backend (docs/protocol.md §3, §4): Serve never
// panics and always returns (stdin EOF = shutdown then exit), with status
// 0 or 1, and every line it writes is one JSON-RPC 2.0 message.
func FuzzServer_HostFrames(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"method":"session/open","params":{"sessionKey":"k","agent":"generic","command":{"path":"/bin/true"},"cwd":"/tmp","limits":{"pids":5},"inheritEnv":["A"]}}` + "\n" +
			`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"session":"s","requestId":"hold-1","prompt":"x"}}` + "\n" +
			`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":3}}` + "\n" +
			`{"jsonrpc":"2.0","id":4,"method":"shutdown"}` + "\n" + `{"jsonrpc":"2.0","method":"exit"}` + "\n",
		`{"jsonrpc":"2.0","id":"a","method":"session/status","params":{"session":"x"}}` + "\n[]\n{}\n" +
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}` + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n" +
			`{"jsonrpc":"2.0","id":1,"method":"session/open","params":{"sessionKey":"hold"}}` + "\n" +
			`{"jsonrpc":"2.0","id":1,"method":"session/open","params":{"sessionKey":"hold"}}` + "\n" +
			`{"jsonrpc":"2.0","id":9,"result":{"outcome":"cancelled"}}` + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"capabilities":{"permissionRequests":true}}}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"method":"session/open","params":{"sessionKey":"k","agent":"a","command":{"path":"/x","sha256":"zz"},"cwd":"/","env":{"A=":"b"},"permissionTimeoutMs":0}}` + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := &syncBuf{}
		srv := NewServer(Options{In: bytes.NewReader(in), Out: out, Framing: FramingNDJSON, MaxFrameBytes: 4096})
		fb := &fakeBackend{srv: srv}
		code := make(chan int, 1)
		go func() { code <- srv.Serve(fb) }()
		select {
		case c := <-code:
			if c != 0 && c != 1 {
				t.Fatalf("exit status %d", c)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("Serve did not return after stdin EOF; wrote:\n%s", out.bytes())
		}
		for _, line := range bytes.Split(out.bytes(), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil || string(m["jsonrpc"]) != `"2.0"` {
				t.Fatalf("wrote a line that is not a JSON-RPC 2.0 message: %q", line)
			}
		}
	})
}
