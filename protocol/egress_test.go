package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

func openWith(t *testing.T, extra string) *Error {
	t.Helper()
	var p OpenParams
	raw := `{"sessionKey":"k","agent":"codex","command":{"path":"/bin/true"},"cwd":"/tmp",` + extra + `}`
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		t.Fatalf("%s: %v", extra, err)
	}
	return p.Validate()
}

// TestValidate_NetworkAllow: a well-formed allow list passes; the first
// bad entry is -32602 naming sandbox.network.allow.N with the reason; a
// shape that is none of the network forms names sandbox.network
// (docs/protocol.md §19.1).
func TestValidate_NetworkAllow(t *testing.T) {
	if e := openWith(t, `"sandbox":{"network":{"allow":["api.openai.com:443","*.anthropic.com:443","127.0.0.1:8787","[::1]:8787"]}}`); e != nil {
		t.Fatalf("a good list: %v", e)
	}
	if e := openWith(t, `"sandbox":{"network":{"allow":[]}}`); e != nil {
		t.Fatalf("an empty list: %v", e)
	}
	for extra, want := range map[string]string{
		`"sandbox":{"network":{"allow":["a.test:443","b.test"]}}`:             "sandbox.network.allow.1",
		`"sandbox":{"network":{"allow":["a.test:443","x:1","*:443"]}}`:        "sandbox.network.allow.2",
		`"sandbox":{"network":{"allow":["::1:80"]}}`:                          "sandbox.network.allow.0",
		`"sandbox":{"network":{"allow":["a.test:70000"]}}`:                    "sandbox.network.allow.0",
		`"sandbox":{"network":{"allow":["a.test:80"],"connectTcp":[80]}}`:     "sandbox.network",
		`"sandbox":{"network":{"alow":["a.test:80"]}}`:                        "sandbox.network.alow",
		`"sandbox":{"network":{}}`:                                            "sandbox.network",
		`"sandbox":{"network":7}`:                                             "sandbox.network",
		`"sandbox":{"network":"allow"}`:                                       "sandbox.network",
		`"sandbox":{"network":{"allow":"a.test:80"}}`:                         "sandbox.network.allow",
		`"sandbox":{"network":{"allow":null}}`:                                "sandbox.network.allow",
		`"sandbox":{"network":{"connectTcp":["443"]}}`:                        "sandbox.network.connectTcp",
		`"limits":{"connections":0}`:                                          "limits.connections",
		`"limits":{"connections":65537}`:                                      "limits.connections",
		`"limits":{"connections":-1},"sandbox":{"network":{"allow":["a:1"]}}`: "limits.connections",
	} {
		e := openWith(t, extra)
		if e == nil || e.RPCCode != CodeInvalidParams || e.Data.Field != want {
			t.Errorf("%s: %+v, want -32602 field %s", extra, e, want)
			continue
		}
		if strings.HasSuffix(want, ".1") && !strings.Contains(e.Message, "port") {
			t.Errorf("%s: message %q does not say why", extra, e.Message)
		}
	}
	many := make([]string, MaxAllowEntries+1)
	for i := range many {
		many[i] = `"a.test:1"`
	}
	if e := openWith(t, `"sandbox":{"network":{"allow":[`+strings.Join(many, ",")+`]}}`); e == nil || e.Data.Field != "sandbox.network.allow" {
		t.Errorf("%d entries: %+v", len(many), e)
	}
	if e := openWith(t, `"limits":{"connections":1}`); e != nil {
		t.Errorf("connections 1: %v", e)
	}
}

// TestSandboxNetwork_WireForms: each mode marshals to its wire form and
// reads back.
func TestSandboxNetwork_WireForms(t *testing.T) {
	for _, n := range []SandboxNetwork{{Mode: NetworkAll}, {Mode: NetworkNone}, {Mode: NetworkConnectTCP, ConnectTCP: []int{443}},
		{Mode: NetworkAllow, Allow: []string{"a.test:1", "[::1]:2"}}, {Mode: NetworkAllow}} {
		b, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		var back SandboxNetwork
		if err := json.Unmarshal(b, &back); err != nil || back.Mode != n.Mode || len(back.Allow) != len(n.Allow) || back.badField != "" {
			t.Errorf("%s read back as %+v (%v)", b, back, err)
		}
	}
	b, _ := json.Marshal(SandboxNetwork{Mode: NetworkAllow})
	if string(b) != `{"allow":[]}` {
		t.Errorf("an empty allow list marshals as %s", b)
	}
}
