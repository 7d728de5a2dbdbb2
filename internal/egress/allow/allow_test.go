package allow

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
)

// TestParse_Forms: every form of docs/protocol.md §19.1 parses to its
// canonical entry; names are lower-cased without a trailing dot.
func TestParse_Forms(t *testing.T) {
	for in, want := range map[string]Entry{
		"api.openai.com:443":   {Kind: Name, Name: "api.openai.com", Port: 443},
		"API.OpenAI.com.:443":  {Kind: Name, Name: "api.openai.com", Port: 443},
		"model.test:8080":      {Kind: Name, Name: "model.test", Port: 8080},
		"single:1":             {Kind: Name, Name: "single", Port: 1},
		"_srv.x-y.test:65535":  {Kind: Name, Name: "_srv.x-y.test", Port: 65535},
		"*.anthropic.com:443":  {Kind: Wildcard, Name: "anthropic.com", Port: 443},
		"*.test:8080":          {Kind: Wildcard, Name: "test", Port: 8080},
		"127.0.0.1:8787":       {Kind: Addr, Addr: netip.MustParseAddr("127.0.0.1"), Port: 8787},
		"10.1.2.3:80":          {Kind: Addr, Addr: netip.MustParseAddr("10.1.2.3"), Port: 80},
		"[::1]:8787":           {Kind: Addr, Addr: netip.MustParseAddr("::1"), Port: 8787},
		"[2001:db8::1]:443":    {Kind: Addr, Addr: netip.MustParseAddr("2001:db8::1"), Port: 443},
		"[2001:DB8:0::1]:443":  {Kind: Addr, Addr: netip.MustParseAddr("2001:db8::1"), Port: 443},
		"xn--bcher-kva.ch:443": {Kind: Name, Name: "xn--bcher-kva.ch", Port: 443},
	} {
		got, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if got != want {
			t.Errorf("Parse(%q) = %+v, want %+v", in, got, want)
		}
	}
}

// TestParse_Refusals: each malformed entry is refused with the error that
// says why.
func TestParse_Refusals(t *testing.T) {
	for in, want := range map[string]error{
		"api.openai.com":                 ErrNoPort,
		"api.openai.com:":                ErrNoPort,
		"api.openai.com:0":               ErrBadPort,
		"api.openai.com:65536":           ErrBadPort,
		"api.openai.com:-1":              ErrBadPort,
		"api.openai.com:+443":            ErrBadPort,
		"api.openai.com:0443":            ErrBadPort,
		"api.openai.com:https":           ErrBadPort,
		":443":                           ErrBadName,
		"a..b:443":                       ErrBadName,
		"a b:443":                        ErrBadName,
		"ünicode.test:443":               ErrBadName,
		"1.2.3:443":                      ErrBadAddr,
		"1.2.3.4.5:443":                  ErrBadAddr,
		"256.1.1.1:443":                  ErrBadAddr,
		"0.0.0.0:443":                    ErrBadAddr,
		"224.0.0.1:443":                  ErrBadAddr,
		"255.255.255.255:443":            ErrBadAddr,
		"::1:443":                        ErrBadAddr,
		"[::]:443":                       ErrBadAddr,
		"[ff02::1]:443":                  ErrBadAddr,
		"[fe80::1%eth0]:443":             ErrBadAddr,
		"[::ffff:1.2.3.4]:443":           ErrBadAddr,
		"[1.2.3.4]:443":                  ErrBadAddr,
		"[::1:443":                       ErrBadAddr,
		"*:443":                          ErrWildcard,
		"*.:443":                         ErrWildcard,
		"a*.test:443":                    ErrWildcard,
		"*.*.test:443":                   ErrWildcard,
		"x.*.test:443":                   ErrWildcard,
		"localhost:8080":                 ErrLocalhost,
		"a.localhost:8080":               ErrLocalhost,
		"https://api.openai.com:443":     ErrURL,
		"api.openai.com:443/v1":          ErrURL,
		"user@api.openai.com:443":        ErrURL,
		"example.123:443":                ErrBadName,
		string(make([]byte, 300)) + ":1": ErrBadName,
	} {
		_, err := Parse(in)
		if !errors.Is(err, want) {
			t.Errorf("Parse(%q) = %v, want %v", in, err, want)
		}
	}
	long := ""
	for len(long) < 250 {
		long += "abcdefghi."
	}
	if _, err := Parse(long + "test:1"); !errors.Is(err, ErrBadName) {
		t.Errorf("a %d-byte name: %v, want ErrBadName", len(long)+4, err)
	}
	label := "a"
	for len(label) < 64 {
		label += "a"
	}
	if _, err := Parse(label + ".test:1"); !errors.Is(err, ErrBadName) {
		t.Errorf("a 64-byte label: %v, want ErrBadName", err)
	}
}

// TestMatchName_Wildcard: "*.test" admits any name one or more labels
// below test and never test itself nor a name that merely ends in "test"
// (docs/protocol.md §19.1).
func TestMatchName_Wildcard(t *testing.T) {
	e, err := Parse("*.test:8080")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"a.test": true, "a.b.test": true, "x.y.z.test": true,
		"test": false, "atest": false, "a.testing": false, "test.a": false, ".test": false,
		"a.test.evil": false, "a-test": false,
	} {
		if got := e.MatchName(name); got != want {
			t.Errorf("*.test matches %q: %v, want %v", name, got, want)
		}
	}
	n, _ := Parse("model.test:8080")
	for name, want := range map[string]bool{"model.test": true, "a.model.test": false, "model.tes": false, "odel.test": false} {
		if got := n.MatchName(name); got != want {
			t.Errorf("model.test matches %q: %v, want %v", name, got, want)
		}
	}
	a, _ := Parse("127.0.0.1:80")
	if a.MatchName("127.0.0.1") {
		t.Error("an address entry matched a name")
	}
}

// TestList_Queries: ports per name, addresses, duplicates kept once, and
// the index of the first bad entry.
func TestList_Queries(t *testing.T) {
	l, err := ParseList([]string{"model.test:8080", "*.test:9090", "*.test:8080", "127.0.0.1:8787", "[::1]:8787",
		"MODEL.test:8080", "10.0.0.1:443"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 6 {
		t.Errorf("duplicates not dropped: %v", l.Strings())
	}
	if got := l.NamePorts("model.test"); !slices.Equal(got, []uint16{8080, 9090}) {
		t.Errorf("model.test ports %v", got)
	}
	if got := l.NamePorts("a.b.test"); !slices.Equal(got, []uint16{8080, 9090}) {
		t.Errorf("a.b.test ports %v", got)
	}
	if got := l.NamePorts("test"); got != nil {
		t.Errorf("test ports %v, want none", got)
	}
	if l.AllowsName("other.example") || !l.AllowsName("x.test") {
		t.Error("AllowsName wrong")
	}
	if !l.AllowsNamePort("x.test", 9090) || l.AllowsNamePort("x.test", 8787) {
		t.Error("AllowsNamePort wrong")
	}
	if !l.AllowsAddr(netip.MustParseAddr("::ffff:127.0.0.1"), 8787) || l.AllowsAddr(netip.MustParseAddr("127.0.0.1"), 8080) {
		t.Error("AllowsAddr wrong")
	}
	if got := l.Ports(); !slices.Equal(got, []uint16{443, 8080, 8787, 9090}) {
		t.Errorf("Ports %v", got)
	}
	if got := l.Addrs(); len(got) != 3 {
		t.Errorf("Addrs %v", got)
	}
	if !l.HasNames() {
		t.Error("HasNames false")
	}
	if got := l.Strings(); got[3] != "127.0.0.1:8787" || got[4] != "[::1]:8787" || got[1] != "*.test:9090" {
		t.Errorf("Strings %v", got)
	}

	_, err = ParseList([]string{"a.test:1", "b.test:2", "bad"})
	var le *ListError
	if !errors.As(err, &le) || le.Index != 2 || !errors.Is(err, ErrNoPort) {
		t.Errorf("ParseList bad third entry: %v", err)
	}
	many := make([]string, MaxEntries+1)
	for i := range many {
		many[i] = "a.test:1"
	}
	if _, err := ParseList(many); !errors.Is(err, ErrTooMany) {
		t.Errorf("%d entries: %v", len(many), err)
	}
}
