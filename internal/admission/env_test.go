package admission

import (
	"slices"
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/redact"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestInheritedEnv_Policies (docs/protocol.md §18.1): minimal keeps only
// the listed names and LC_*, all keeps everything, none nothing; an
// unknown policy is treated as minimal.
func TestInheritedEnv_Policies(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/h", "LC_ALL=C", "LANG=C", "OPENAI_API_KEY=sk", "TMPDIR=/t", "PATHX=1"}
	for policy, want := range map[string]string{"minimal": "PATH=/bin HOME=/h LC_ALL=C LANG=C TMPDIR=/t",
		"all": "PATH=/bin HOME=/h LC_ALL=C LANG=C OPENAI_API_KEY=sk TMPDIR=/t PATHX=1", "none": "",
		"bogus": "PATH=/bin HOME=/h LC_ALL=C LANG=C TMPDIR=/t"} {
		if got := strings.Join(InheritedEnv(policy, environ), " "); got != want {
			t.Errorf("%s: %q, want %q", policy, got, want)
		}
	}
}

// TestProviderEnvFor_InheritEnvNames: the open's inheritEnv names come from
// the sidecar's environment (first definition), replace a base entry of
// the same name, and a name it does not define is skipped.
func TestProviderEnvFor_InheritEnvNames(t *testing.T) {
	e := ProviderEnv{Base: []string{"PATH=/bin", "KEY=base"},
		Sidecar: []string{"PATH=/bin", "KEY=first", "KEY=second", "OTHER=o"}}
	got := strings.Join(e.For(protocol.OpenParams{InheritEnv: []string{"KEY", "MISSING"}}), " ")
	if got != "PATH=/bin KEY=first" {
		t.Errorf("base env %q, want \"PATH=/bin KEY=first\"", got)
	}
	if got := strings.Join(e.For(protocol.OpenParams{}), " "); got != "PATH=/bin KEY=base" {
		t.Errorf("without inheritEnv %q", got)
	}
}

// TestProviderEnvSecrets_RedactsInheritedValues (docs/protocol.md §13, §18.1): a
// value passed by an inheritEnv name is redacted from error texts like
// an env value.
func TestProviderEnvSecrets_RedactsInheritedValues(t *testing.T) {
	e := ProviderEnv{Base: []string{"PATH=/bin"}, Sidecar: []string{"PATH=/bin", "AMBIENT_KEY=sk-ambient-123"}}
	red := redact.New(e.Secrets(protocol.OpenParams{InheritEnv: []string{"AMBIENT_KEY"}, Env: map[string]string{"K": "sk-open-456"}}))
	got := red.Clean("agent said sk-ambient-123 and sk-open-456 on /bin")
	if strings.Contains(got, "sk-ambient-123") || strings.Contains(got, "sk-open-456") || !strings.Contains(got, "/bin") {
		t.Errorf("redacted %q", got)
	}
}

// TestProviderEnv_WithholdsStoreCredentials (docs/protocol.md §24): the
// state store's credential variables never come from the sidecar's
// environment — not through --inherit-env all's base, not through an
// inheritEnv name —, an open's own env still sets one, and the store's
// credential values are redacted from a session's output and errors.
func TestProviderEnv_WithholdsStoreCredentials(t *testing.T) {
	environ := []string{"PATH=/bin", "AWS_ACCESS_KEY_ID=AKSTORE1234", "AWS_SECRET_ACCESS_KEY=store-secret-0123456789",
		"AWS_SESSION_TOKEN=store-token-0123456789", "AWS_REGION=us-east-1", "OTHER=o"}
	held := []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}
	for _, policy := range []string{protocol.InheritAll, protocol.InheritMinimal, protocol.InheritNone} {
		e := ProviderEnv{Base: Withhold(InheritedEnv(policy, environ), held), Policy: policy, Sidecar: environ,
			Withheld: held, StoreSecrets: []string{"AKSTORE1234", "store-secret-0123456789", "store-token-0123456789"}}
		p := protocol.OpenParams{InheritEnv: []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "OTHER"},
			Env: map[string]string{"AWS_ACCESS_KEY_ID": "AKHOSTOWN"}}
		got := e.For(p)
		for _, kv := range got {
			if k, _, _ := strings.Cut(kv, "="); k == "AWS_SECRET_ACCESS_KEY" || k == "AWS_SESSION_TOKEN" || k == "AWS_ACCESS_KEY_ID" {
				t.Errorf("%s: the store's %s reached the provider's base env %q", policy, k, got)
			}
		}
		if !slices.Contains(got, "OTHER=o") {
			t.Errorf("%s: an inheritEnv name not withheld was dropped: %q", policy, got)
		}
		if policy == protocol.InheritAll && !slices.Contains(got, "AWS_REGION=us-east-1") {
			t.Errorf("all: AWS_REGION (no credential) was withheld too: %q", got)
		}
		// A literal ProviderEnv whose Base was not filtered is filtered by For.
		raw := ProviderEnv{Base: environ, Withheld: held}
		if got := strings.Join(raw.For(protocol.OpenParams{}), " "); strings.Contains(got, "AWS_SECRET_ACCESS_KEY") {
			t.Errorf("For passed a withheld name of Base: %q", got)
		}
		red := redact.New(e.Secrets(p))
		text := "agent printed AKSTORE1234 store-secret-0123456789 store-token-0123456789 AKHOSTOWN"
		if c := red.Clean(text); strings.Contains(c, "store-") || strings.Contains(c, "AKSTORE") || strings.Contains(c, "AKHOSTOWN") {
			t.Errorf("%s: Clean left a credential: %q", policy, c)
		}
		raw2, changed := red.CleanJSON([]byte(`{"text":"` + text + `"}`))
		if !changed || strings.Contains(string(raw2), "store-secret") || strings.Contains(string(raw2), "store-token") {
			t.Errorf("%s: CleanJSON left a credential: %s", policy, raw2)
		}
	}
	if got := Withhold([]string{"A=1", "B=2"}, nil); strings.Join(got, " ") != "A=1 B=2" {
		t.Errorf("Withhold without names: %q", got)
	}
}
