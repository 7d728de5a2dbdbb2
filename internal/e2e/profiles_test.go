package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
)

// TestProfiles_AuthenticateByProfileRule: every profile passes the handshake
// with the fault agent configured like its agent: the agent advertises the
// profile's auth method and refuses session/new until authenticated (as
// codex-acp does); with the method's env var in the launch env the sidecar
// authenticates with exactly that method id and the secret never appears in
// what the agent received (docs/rules.md#r3); without it the open fails
// ACPX_SESSION_ENSURE_FAILED with a complete cleanup and nothing alive.
// `generic` authenticates with nothing and `opencode` has no rule.
func TestProfiles_AuthenticateByProfileRule(t *testing.T) {
	for _, name := range profiles.Names() {
		prof, _ := profiles.Lookup(name)
		t.Run(name, func(t *testing.T) {
			e := newFaultEnv(t)
			s := startSidecar(t, "--state-dir", e.stateDir)
			s.initialize(false)
			if len(prof.Auth) == 0 {
				// No rule: an agent that needs auth cannot be opened...
				p := e.openParams("noauth", "auth=some-method:SOME_KEY")
				p["agent"] = name
				if prof.Binding.CannotAsk != "" {
					p["permissionMode"] = "approve-all" // else refused before launch: it cannot ask
				}
				wantError(t, "open without an auth rule", s.call("session/open", p), -32000, "AUTH_REQUIRED")
				// ...and one that needs none opens.
				plain := e.openParams("plain", "normal")
				plain["agent"] = name
				plain["permissionMode"] = "approve-all"
				s.mustCall("session/open", plain, nil)
				_, _ = s.shutdownAndExit()
				waitNoMarked(t, e.mark, e.work, 5*time.Second)
				return
			}
			rule := prof.Auth[0]
			secret := "sk-profile-" + randHex(10)
			rec := filepath.Join(e.work, "agent.jsonl")
			p := e.openParams("authed", "auth="+rule.MethodID+":"+rule.EnvVar+",record="+rec)
			p["agent"] = name
			// The fault agent offers none of the profiles' asking modes: a
			// plain approve-all needs no binding (TestBinding_* cover it).
			p["permissionMode"] = "approve-all"
			p["env"].(map[string]string)[rule.EnvVar] = secret
			s.mustCall("session/open", p, nil)
			got, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(got), `"method":"authenticate"`) || !strings.Contains(string(got), `"methodId":"`+rule.MethodID+`"`) {
				t.Errorf("the agent did not receive authenticate %s:\n%s", rule.MethodID, truncate(string(got), 2000))
			}
			if strings.Contains(string(got), secret) {
				t.Errorf("the launch secret reached the agent's protocol messages")
			}

			// Without the env var: refused by the agent, cleaned up.
			p2 := e.openParams("unauthed", "auth="+rule.MethodID+":"+rule.EnvVar)
			p2["agent"] = name
			p2["permissionMode"] = "approve-all"
			d := wantError(t, "open without credentials", s.call("session/open", p2), -32000, "AUTH_REQUIRED")
			if d.Cleanup == nil || !d.Cleanup.Complete {
				t.Errorf("failed open without a complete cleanup proof: %+v", d)
			}
			if _, status := s.shutdownAndExit(); status != 0 {
				t.Errorf("exit status %d", status)
			}
			waitNoMarked(t, e.mark, e.work, 5*time.Second)
			grepSecret(t, secret, e.stateDir, s.allOutput())
		})
	}
}

// TestProfiles_HandshakeTimeoutReapsProviderForEveryProfile:
// docs/rules.md#r7 under each profile — a provider that never answers
// session/new is timed out with ACPX_SESSION_HANDSHAKE_TIMEOUT and proven
// gone.
func TestProfiles_HandshakeTimeoutReapsProviderForEveryProfile(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir, "--term-grace-ms", "300", "--kill-grace-ms", "300")
	s.initialize(false)
	for _, name := range profiles.Names() {
		p := e.openParams("hang-"+name, "hang-new")
		p["agent"] = name
		p["handshakeTimeoutMs"] = 200
		if prof, _ := profiles.Lookup(name); prof.Binding.CannotAsk != "" {
			p["permissionMode"] = "approve-all" // else refused before launch: it cannot ask
		}
		d := wantError(t, name, s.call("session/open", p), -32000, "ACPX_SESSION_HANDSHAKE_TIMEOUT")
		if d.Cleanup == nil || !d.Cleanup.Complete {
			t.Errorf("%s: no complete cleanup: %+v", name, d)
		}
	}
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}
