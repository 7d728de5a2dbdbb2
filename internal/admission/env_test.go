package admission

import (
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
