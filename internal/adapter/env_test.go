package adapter

import (
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/redact"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestSecretEnv_RedactsInheritedValues (docs/protocol.md §13, §18.1): a
// value passed by an inheritEnv name is redacted from error texts like
// an env value.
func TestSecretEnv_RedactsInheritedValues(t *testing.T) {
	m := &Manager{cfg: Config{Env: admission.ProviderEnv{Base: []string{"PATH=/bin"}, Sidecar: []string{"PATH=/bin", "AMBIENT_KEY=sk-ambient-123"}}}}
	red := redact.New(m.cfg.Env.Secrets(protocol.OpenParams{InheritEnv: []string{"AMBIENT_KEY"}, Env: map[string]string{"K": "sk-open-456"}}))
	got := red.Clean("agent said sk-ambient-123 and sk-open-456 on /bin")
	if strings.Contains(got, "sk-ambient-123") || strings.Contains(got, "sk-open-456") || !strings.Contains(got, "/bin") {
		t.Errorf("redacted %q", got)
	}
}
