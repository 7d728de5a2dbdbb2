package adapter

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestSecretEnv_RedactsInheritedValues (docs/protocol.md §13, §18.1): a
// value passed by an inheritEnv name is redacted from error texts like
// an env value.
func TestSecretEnv_RedactsInheritedValues(t *testing.T) {
	m := &Manager{cfg: Config{Env: admission.ProviderEnv{Base: []string{"PATH=/bin"}, Sidecar: []string{"PATH=/bin", "AMBIENT_KEY=sk-ambient-123"}}}}
	red := newRedactor(m.cfg.Env.Secrets(protocol.OpenParams{InheritEnv: []string{"AMBIENT_KEY"}, Env: map[string]string{"K": "sk-open-456"}}))
	got := red.clean("agent said sk-ambient-123 and sk-open-456 on /bin")
	if strings.Contains(got, "sk-ambient-123") || strings.Contains(got, "sk-open-456") || !strings.Contains(got, "/bin") {
		t.Errorf("redacted %q", got)
	}
}

// TestRedactor_RemovesJSONEscapedSpellings: a secret with a quote, a
// backslash, a tab and a non-ASCII rune is removed from text whether the
// agent quotes it raw, as Go's encoder escapes it, or as Python's
// json.dumps does (ASCII-only); found by a fresh-user trial.
func TestRedactor_RemovesJSONEscapedSpellings(t *testing.T) {
	secret := "Sec\"ret\\Tab\tQq_é4455<"
	r := newRedactor(map[string]string{"MY_KEY": secret})
	for _, text := range []string{
		"raw=" + secret,
		`go=Sec\"ret\\Tab\tQq_é4455<`,
		`html=Sec\"ret\\Tab\tQq_é4455\u003c`,
		`python=Sec\"ret\\Tab\tQq_\u00e94455<`,
	} {
		if got := r.clean(text); strings.Contains(got, "4455") {
			t.Errorf("%q cleaned to %q: the secret is still there", text, got)
		}
	}
}

// TestRedactor_CleanJSON: a JSON value holding a secret (in a string, a
// member name, escaped) comes out valid with "[redacted]" in its place and
// numbers as written; one holding none is returned as it was; an absolute
// path value is left in output.
func TestRedactor_CleanJSON(t *testing.T) {
	r := newRedactor(map[string]string{"K": `se"cret-é`})
	in := []byte(`{"a":"x se\"cret-é y","se\"cret-é":1,"n":12345678901234567890,"l":["se\"cret-\u00e9"]}`)
	out, changed := r.cleanJSON(in)
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
	pr := newRedactor(map[string]string{"HOME": home, "TOKEN": "/Zx9SecretTokenValue"})
	if got, changed := pr.cleanJSON([]byte(`{"text":"wrote ` + home + `/x"}`)); changed {
		t.Errorf("a path value was redacted from output: %s", got)
	}
	if got := pr.clean("cannot write " + home + "/x"); strings.Contains(got, home) {
		t.Errorf("a path value stayed in error text: %q", got)
	}
	if got, _ := pr.cleanJSON([]byte(`{"text":"tok /Zx9SecretTokenValue"}`)); strings.Contains(string(got), "Zx9Secret") {
		t.Errorf("a token starting with / (not a path) passed: %s", got)
	}
	// Other JSON spellings of the secret are caught too (an escaped "/",
	// every rune as \uXXXX); a short value never touches protocol words.
	sr := newRedactor(map[string]string{"A": "a/b/secretZZ", "B": "hunter2secret", "X": "session"})
	for _, in := range []string{`{"t":"esc=a\/b\/secretZZ"}`, `{"t":"\u0068\u0075\u006e\u0074\u0065\u0072\u0032\u0073\u0065\u0063\u0072\u0065\u0074"}`} {
		if got, changed := sr.cleanJSON([]byte(in)); !changed || strings.Contains(string(got), "secret") {
			t.Errorf("%s -> %s (changed %v): an escaped spelling passed", in, got, changed)
		}
	}
	if got, changed := sr.cleanJSON([]byte(`{"session":"s-1","update":{"sessionUpdate":"x","content":{"text":"session"}}}`)); changed {
		t.Errorf("a 7-byte value rewrote protocol words: %s", got)
	}
	clean := []byte(`{"a":"nothing here"}`)
	if got, changed := r.cleanJSON(clean); changed || &got[0] != &clean[0] {
		t.Errorf("a value without a secret was rewritten: %s", got)
	}
}

// TestRedactor_CleanFoldMatchesAnyCase: a DNS name the sidecar lowercased
// loses a mixed-case secret used as a label (session/network), each
// occurrence, whatever the case; a secret that spells "redacted" does not
// loop; short values and other text are kept.
func TestRedactor_CleanFoldMatchesAnyCase(t *testing.T) {
	r := newRedactor(map[string]string{"OPENAI_API_KEY": "sk-Sec-TOPsecret-4242", "X": "redacted", "SHORT": "abc"})
	for in, want := range map[string]string{
		"sk-sec-topsecret-4242.evil.com:443":                       "[redacted].evil.com:443",
		"a.SK-SEC-TOPSECRET-4242.b.sk-sec-topsecret-4242.evil.com": "a.[redacted].b.[redacted].evil.com",
		"redacted.example":   "[redacted].example",
		"evil\x00.wild.test": "evil\x00.wild.test",
		"abc.example:443":    "abc.example:443",
		"api.openai.com:443": "api.openai.com:443",
	} {
		if got := r.cleanFold(in); got != want {
			t.Errorf("cleanFold(%q) = %q, want %q", in, got, want)
		}
	}
}
