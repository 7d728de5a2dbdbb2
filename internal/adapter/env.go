package adapter

import (
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// InheritedEnv is the part of environ ("K=V" entries, the sidecar's own
// environment) that the --inherit-env policy passes to every provider
// (docs/protocol.md §18.1): everything for protocol.InheritAll, nothing
// for protocol.InheritNone, and for protocol.InheritMinimal (and any other
// value: the safe choice) only the names protocol.InMinimalEnv accepts.
func InheritedEnv(policy string, environ []string) []string {
	switch policy {
	case protocol.InheritAll:
		return append([]string(nil), environ...)
	case protocol.InheritNone:
		return nil
	}
	var out []string
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); protocol.InMinimalEnv(k) {
			out = append(out, kv)
		}
	}
	return out
}

// baseEnvFor is the provider's base environment for one open: the
// policy's Config.Env.Base, then each of the open's inheritEnv names that
// Config.Env.Sidecar defines (a name it does not define is skipped, as an
// unset variable would be), later entries replacing earlier ones of the
// same name (docs/protocol.md §18.1).
func (m *Manager) baseEnvFor(p protocol.OpenParams) []string {
	if len(p.InheritEnv) == 0 {
		return m.cfg.Env.Base
	}
	want := map[string]bool{}
	for _, n := range p.InheritEnv {
		want[n] = true
	}
	var out []string
	for _, kv := range m.cfg.Env.Base {
		if k, _, _ := strings.Cut(kv, "="); !want[k] {
			out = append(out, kv)
		}
	}
	for _, kv := range m.cfg.Env.Sidecar {
		if k, _, _ := strings.Cut(kv, "="); want[k] {
			out = append(out, kv)
			delete(want, k) // the first definition wins, as getenv(3) reads it
		}
	}
	return out
}

// secretEnv is what a session's error texts are redacted against
// (docs/protocol.md §13): the open's env, plus the values of its
// inheritEnv names (a host names a variable to pass a secret it does not
// want to send; it is as secret as env).
func (m *Manager) secretEnv(p protocol.OpenParams) map[string]string {
	if len(p.InheritEnv) == 0 {
		return p.Env
	}
	out := make(map[string]string, len(p.Env)+len(p.InheritEnv))
	for _, kv := range m.baseEnvFor(p) {
		k, v, _ := strings.Cut(kv, "=")
		for _, n := range p.InheritEnv {
			if n == k {
				out["inherit:"+k] = v
			}
		}
	}
	for k, v := range p.Env {
		out[k] = v
	}
	return out
}
