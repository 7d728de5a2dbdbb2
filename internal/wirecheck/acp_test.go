package wirecheck

import "testing"

// TestACP_ChecksClientFrames: the ACP v1 schema accepts what a client
// sends and refuses what breaks it (a check that cannot fail is none).
func TestACP_ChecksClientFrames(t *testing.T) {
	s, err := ACPDefault()
	if err != nil {
		t.Fatal(err)
	}
	good := []struct{ frame, method string }{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"configOptions":{"boolean":{}}}}}}`, ""},
		{`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[],"additionalDirectories":["/x"],"_meta":{"k":1}}}`, ""},
		{`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{"cursor":"2"}}`, ""},
		{`{"jsonrpc":"2.0","id":4,"method":"_x/y","params":[1]}`, ""},
		{`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`, ""},
		{`{"jsonrpc":"2.0","id":9,"result":{"outcome":{"outcome":"cancelled"}}}`, "session/request_permission"},
		{`{"jsonrpc":"2.0","id":9,"error":{"code":-32601,"message":"no"}}`, "fs/read_text_file"},
	}
	for _, g := range good {
		if err := s.CheckClientFrame([]byte(g.frame), g.method); err != nil {
			t.Errorf("%s: %v", g.frame, err)
		}
	}
	bad := []struct{ frame, method string }{
		{`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"mcpServers":[]}}`, ""},              // no cwd
		{`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s"}}`, ""},           // no prompt
		{`{"jsonrpc":"2.0","id":2,"method":"session/nope","params":{}}`, ""},                            // no such method
		{`{"jsonrpc":"2.0","id":9,"result":{"outcome":"maybe"}}`, "session/request_permission"},         // bad outcome
		{`{"id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`, ""},   // no jsonrpc
		{`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[{}]}}`, ""}, // not an McpServer
	}
	for _, b := range bad {
		if err := s.CheckClientFrame([]byte(b.frame), b.method); err == nil {
			t.Errorf("%s: accepted", b.frame)
		}
	}
}
