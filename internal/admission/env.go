package admission

import (
	"slices"
	"strconv"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// ProviderEnv is where a provider's environment comes from
// (docs/protocol.md §18.1).
type ProviderEnv struct {
	// Base is the environment every provider inherits ("K=V"), before
	// the open's inheritEnv names and env are added: InheritedEnv of the
	// --inherit-env policy.
	Base []string
	// Policy names the policy Base was made by ("minimal", "all",
	// "none"; initialize.capabilities.inheritEnv). "" reports "minimal".
	Policy string
	// Sidecar is the sidecar's whole environment, where the open's
	// inheritEnv names are looked up.
	Sidecar []string
	// Withheld are names no provider takes from the sidecar's
	// environment, whatever the --inherit-env policy or an open's
	// inheritEnv says: the state store's credential variables
	// (statestore.CredentialEnv; docs/protocol.md §24). An open's own env
	// may still set them: that value is the host's, not the store's.
	Withheld []string
	// StoreSecrets are the state store's credential values
	// (statestore.Credentials.Values), redacted from every session's
	// output, journal and errors like its env values (docs/protocol.md
	// §13, §24). Never logged.
	StoreSecrets []string
}

// Withhold returns env ("K=V" entries) without the entries whose name is
// one of names; env itself when names is empty.
func Withhold(env, names []string) []string {
	if len(names) == 0 {
		return env
	}
	var out []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}

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

// For is the provider's base environment ("K=V" entries) for one open:
// e.Base, then each of the open's inheritEnv names that e.Sidecar
// defines (a name it does not define is skipped, as an
// unset variable would be), later entries replacing earlier ones of the
// same name (docs/protocol.md §18.1). No name of e.Withheld comes from
// either: an inheritEnv name among them is skipped as an undefined one.
func (e ProviderEnv) For(p protocol.OpenParams) []string {
	base := Withhold(e.Base, e.Withheld)
	if len(p.InheritEnv) == 0 {
		return base
	}
	want := map[string]bool{}
	for _, n := range p.InheritEnv {
		if !slices.Contains(e.Withheld, n) {
			want[n] = true
		}
	}
	var out []string
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !want[k] {
			out = append(out, kv)
		}
	}
	for _, kv := range e.Sidecar {
		if k, _, _ := strings.Cut(kv, "="); want[k] {
			out = append(out, kv)
			delete(want, k) // the first definition wins, as getenv(3) reads it
		}
	}
	return out
}

// Secrets is what a session's error texts, notifications and journal
// are redacted against (docs/protocol.md §13): the open's env, plus the
// values of its inheritEnv names (a host names a variable to pass a
// secret it does not want to send; it is as secret as env), plus the
// state store's credential values (e.StoreSecrets: an agent that finds
// them some other way, a credentials file it can read, never gets them
// into a journal or a frame).
func (e ProviderEnv) Secrets(p protocol.OpenParams) map[string]string {
	if len(p.InheritEnv) == 0 && len(e.StoreSecrets) == 0 {
		return p.Env
	}
	out := make(map[string]string, len(p.Env)+len(p.InheritEnv)+len(e.StoreSecrets))
	for _, kv := range e.For(p) {
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
	// Keyed by names no env entry can have (they hold "=").
	for i, v := range e.StoreSecrets {
		out["=store."+strconv.Itoa(i)] = v
	}
	return out
}
