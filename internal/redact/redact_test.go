package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRedactor_RemovesJSONEscapedSpellings: a secret with a quote, a
// backslash, a tab and a non-ASCII rune is removed from text whether the
// agent quotes it raw, as Go's encoder escapes it, or as Python's
// json.dumps does (ASCII-only); found by a fresh-user trial.
func TestRedactor_RemovesJSONEscapedSpellings(t *testing.T) {
	secret := "Sec\"ret\\Tab\tQq_é4455<"
	r := New(map[string]string{"MY_KEY": secret})
	for _, text := range []string{
		"raw=" + secret,
		`go=Sec\"ret\\Tab\tQq_é4455<`,
		`html=Sec\"ret\\Tab\tQq_é4455\u003c`,
		`python=Sec\"ret\\Tab\tQq_\u00e94455<`,
	} {
		if got := r.Clean(text); strings.Contains(got, "4455") {
			t.Errorf("%q cleaned to %q: the secret is still there", text, got)
		}
	}
}

// TestRedactor_CleanJSON: a JSON value holding a secret (in a string, a
// member name, escaped) comes out valid with "[redacted]" in its place and
// numbers as written; one holding none is returned as it was; an absolute
// path value is left in output.
func TestRedactor_CleanJSON(t *testing.T) {
	r := New(map[string]string{"K": `se"cret-é`})
	in := []byte(`{"a":"x se\"cret-é y","se\"cret-é":1,"n":12345678901234567890,"l":["se\"cret-\u00e9"]}`)
	out, changed := r.CleanJSON(in)
	if !changed || !json.Valid(out) {
		t.Fatalf("changed %v, valid %v: %s", changed, json.Valid(out), out)
	}
	if strings.Contains(string(out), `\u00e9`) || strings.Count(string(out), `se\"cret`) != 1 {
		t.Errorf("%s: want the secret gone from every string value (member names are the protocol's and stay)", out)
	}
	want := `{"a":"x [redacted] y","l":["[redacted]"],"n":12345678901234567890,"se\"cret-é":1}`
	if string(out) != want {
		t.Errorf("got %s\nwant %s", out, want)
	}
	// An absolute path (HOME, TMPDIR) stays in agent output; errors
	// still lose it.
	home := t.TempDir()
	pr := New(map[string]string{"HOME": home, "TOKEN": "/Zx9SecretTokenValue"})
	if got, changed := pr.CleanJSON([]byte(`{"text":"wrote ` + home + `/x"}`)); changed {
		t.Errorf("a path value was redacted from output: %s", got)
	}
	if got := pr.Clean("cannot write " + home + "/x"); strings.Contains(got, home) {
		t.Errorf("a path value stayed in error text: %q", got)
	}
	if got, _ := pr.CleanJSON([]byte(`{"text":"tok /Zx9SecretTokenValue"}`)); strings.Contains(string(got), "Zx9Secret") {
		t.Errorf("a token starting with / (not a path) passed: %s", got)
	}
	// Other JSON spellings of the secret are caught too (an escaped "/",
	// every rune as \uXXXX); a short value never touches protocol words.
	sr := New(map[string]string{"A": "a/b/secretZZ", "B": "hunter2secret", "X": "session"})
	for _, in := range []string{`{"t":"esc=a\/b\/secretZZ"}`, `{"t":"\u0068\u0075\u006e\u0074\u0065\u0072\u0032\u0073\u0065\u0063\u0072\u0065\u0074"}`} {
		if got, changed := sr.CleanJSON([]byte(in)); !changed || strings.Contains(string(got), "secret") {
			t.Errorf("%s -> %s (changed %v): an escaped spelling passed", in, got, changed)
		}
	}
	if got, changed := sr.CleanJSON([]byte(`{"session":"s-1","update":{"sessionUpdate":"x","content":{"text":"session"}}}`)); changed {
		t.Errorf("a 7-byte value rewrote protocol words: %s", got)
	}
	clean := []byte(`{"a":"nothing here"}`)
	if got, changed := r.CleanJSON(clean); changed || &got[0] != &clean[0] {
		t.Errorf("a value without a secret was rewritten: %s", got)
	}
}

// TestRedactor_CleanFoldMatchesAnyCase: a DNS name the sidecar lowercased
// loses a mixed-case secret used as a label (session/network), each
// occurrence, whatever the case; a secret that spells "redacted" does not
// loop; short values and other text are kept.
func TestRedactor_CleanFoldMatchesAnyCase(t *testing.T) {
	r := New(map[string]string{"OPENAI_API_KEY": "sk-Sec-TOPsecret-4242", "X": "redacted", "SHORT": "abc"})
	for in, want := range map[string]string{
		"sk-sec-topsecret-4242.evil.com:443":                       "[redacted].evil.com:443",
		"a.SK-SEC-TOPSECRET-4242.b.sk-sec-topsecret-4242.evil.com": "a.[redacted].b.[redacted].evil.com",
		"redacted.example":   "[redacted].example",
		"evil\x00.wild.test": "evil\x00.wild.test",
		"abc.example:443":    "abc.example:443",
		"api.openai.com:443": "api.openai.com:443",
	} {
		if got := r.CleanFold(in); got != want {
			t.Errorf("CleanFold(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedactor_Clean: values of minSecretLen bytes or more go from error
// text, longest first; shorter ones stay; the text is cut to 500 bytes;
// a nil Redactor leaves text as it is.
func TestRedactor_Clean(t *testing.T) {
	r := New(map[string]string{"A": "abc", "B": "token-1", "C": "token-12345", "D": "path"})
	long := strings.Repeat("x", 600)
	for _, c := range []struct{ in, want string }{
		{"abc token-1 token-12345 /a/path", "abc [redacted] [redacted] /a/[redacted]"},
		{"nothing", "nothing"},
		{long, long[:500] + "…"},
	} {
		if got := r.Clean(c.in); got != c.want {
			t.Errorf("Clean(%.40q) = %.60q, want %.60q", c.in, got, c.want)
		}
	}
	var none *Redactor
	if got := none.Clean("token-1"); got != "token-1" {
		t.Errorf("nil Redactor: %q", got)
	}
	if got, changed := none.CleanJSON([]byte(`"token-1"`)); changed || string(got) != `"token-1"` {
		t.Errorf("nil Redactor: %s", got)
	}
	if got := New(map[string]string{"K": "token-1"}).CleanFold("TOKEN-1.example"); got != "TOKEN-1.example" {
		t.Errorf("a 7-byte value is not output: %q", got)
	}
}
