package profiles

import "testing"

// TestProfiles_AreCompleteData: every profile named in initialize has a
// known model-control style, auth rules with both halves, and quirks with
// sources; unknown names are refused (SEED-BEHAVIOR 13); "generic" is last.
func TestProfiles_AreCompleteData(t *testing.T) {
	names := Names()
	if len(names) == 0 || names[len(names)-1] != "generic" {
		t.Fatalf("names %v: generic must be last", names)
	}
	for _, n := range names {
		p, ok := Lookup(n)
		if !ok || p.Name != n || p.Title == "" {
			t.Fatalf("%s: %+v", n, p)
		}
		if p.ModelControl != ModelControlConfigOption && p.ModelControl != ModelControlLegacy {
			t.Errorf("%s: model control %q", n, p.ModelControl)
		}
		for _, r := range p.Auth {
			if r.MethodID == "" || r.EnvVar == "" {
				t.Errorf("%s: incomplete auth rule %+v", n, r)
			}
		}
		for _, q := range p.Quirks {
			if q.Text == "" || q.Source == "" {
				t.Errorf("%s: quirk without source %+v", n, q)
			}
		}
	}
	if _, ok := Lookup("Codex"); ok {
		t.Errorf("profile names are exact")
	}
	if c, _ := Lookup("codex"); len(c.Auth) == 0 || c.Auth[0].MethodID != "openai-api-key" {
		t.Errorf("codex authenticates with openai-api-key first (CODEX-OFFLINE.md): %+v", c.Auth)
	}
}
