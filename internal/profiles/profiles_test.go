package profiles

import (
	"encoding/json"
	"testing"
)

// TestProfiles_AreCompleteData: every profile named in initialize has a
// known model-control style, auth rules with both halves, and quirks with
// sources; unknown names are refused (docs/rules.md#r13); "generic" is last.
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
		t.Errorf("codex authenticates with openai-api-key first (docs/agents.md, Codex legacy): %+v", c.Auth)
	}
}

// TestProfiles_BindingsOfTodaysAgents: the agents that decide tool use
// alone by default are bound (docs/agents.md): codex to read-only, claude
// and gemini to default, opencode by OPENCODE_PERMISSION asking for every
// permission; generic binds nothing.
func TestProfiles_BindingsOfTodaysAgents(t *testing.T) {
	for name, ask := range map[string]string{"codex": "read-only", "claude": "default", "gemini": "default"} {
		p, _ := Lookup(name)
		if len(p.Binding.AskModes) == 0 || p.Binding.AskModes[0] != ask || p.Binding.Source == "" {
			t.Errorf("%s binding %+v, want asking mode %q with a source", name, p.Binding, ask)
		}
		if p.Binding.Autonomous(ask) || !p.Binding.Asks(ask) || p.Binding.Asks("some-other-mode") || p.Binding.Autonomous("") {
			t.Errorf("%s: Autonomous/Asks misclassify modes", name)
		}
		for _, m := range p.Binding.AutonomousModes {
			if p.Binding.Asks(m) {
				t.Errorf("%s: mode %q is both autonomous and asking", name, m)
			}
		}
	}
	oc, _ := Lookup("opencode")
	var perms map[string]string
	if err := json.Unmarshal([]byte(oc.Binding.Env["OPENCODE_PERMISSION"]), &perms); err != nil || perms["*"] != "ask" || perms["bash"] != "ask" {
		t.Errorf("opencode OPENCODE_PERMISSION %q: want JSON asking for * and bash (%v)", oc.Binding.Env["OPENCODE_PERMISSION"], err)
	}
	for k, v := range perms {
		if v != "ask" {
			t.Errorf("opencode permission %s = %q, want ask", k, v)
		}
	}
	if oc.Binding.Autonomous("build") || !oc.Binding.Asks("build") || !oc.Binding.Bound() {
		t.Errorf("opencode is bound by env in every mode")
	}
	if g, _ := Lookup("generic"); g.Binding.Bound() {
		t.Errorf("generic must bind nothing")
	}
}
