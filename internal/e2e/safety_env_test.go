package e2e

import (
	"bytes"
	"os"
	"strconv"
	"testing"
)

// environOf is /proc/<pid>/environ as "K=V" entries.
func environOf(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatalf("reading the provider's environ: %v", err)
	}
	var out []string
	for _, kv := range bytes.Split(b, []byte{0}) {
		if len(kv) > 0 {
			out = append(out, string(kv))
		}
	}
	return out
}

func hasEntry(env []string, kv string) bool {
	for _, e := range env {
		if e == kv {
			return true
		}
	}
	return false
}

func hasName(env []string, name string) bool {
	for _, e := range env {
		if len(e) > len(name) && e[:len(name)+1] == name+"=" {
			return true
		}
	}
	return false
}

// TestEnv_AmbientSecretStaysOutOfProvidersByDefault (docs/protocol.md
// §18.1): a key in the sidecar's own environment is absent from the
// provider's /proc/<pid>/environ under the default --inherit-env minimal
// (PATH still passes), present when the open names it in inheritEnv, and
// initialize reports the policy. The secret value never reaches a frame,
// the logs or the state directory.
func TestEnv_AmbientSecretStaysOutOfProvidersByDefault(t *testing.T) {
	secret := "sk-ambient-" + randHex(12)
	t.Setenv("ACPX_E2E_AMBIENT_API_KEY", secret)
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	init := s.initialize(false)
	caps, _ := init["capabilities"].(map[string]any)
	if caps["inheritEnv"] != "minimal" {
		t.Errorf("initialize.capabilities.inheritEnv = %v, want \"minimal\"", caps["inheritEnv"])
	}

	plain := e.open(s, "env-default", "")
	env := environOf(t, plain.Process.Pid)
	if hasName(env, "ACPX_E2E_AMBIENT_API_KEY") {
		t.Errorf("the ambient secret reached the provider under the default policy")
	}
	if !hasName(env, "PATH") || !hasEntry(env, "ACPX_TEST_MARK="+e.mark) {
		t.Errorf("provider environ lacks PATH or the open's env: %q", env)
	}

	p := e.openParams("env-named", "")
	p["inheritEnv"] = []string{"ACPX_E2E_AMBIENT_API_KEY", "ACPX_E2E_NOT_SET_ANYWHERE"}
	var named openResult
	s.mustCall("session/open", p, &named)
	env = environOf(t, named.Process.Pid)
	if !hasEntry(env, "ACPX_E2E_AMBIENT_API_KEY="+secret) {
		t.Errorf("inheritEnv did not pass the named variable")
	}
	if hasName(env, "ACPX_E2E_NOT_SET_ANYWHERE") {
		t.Errorf("an inheritEnv name the sidecar does not define was set")
	}
	seedCloseProof(t, s, plain.Session, nil)
	seedCloseProof(t, s, named.Session, nil)
	_, status := s.shutdownAndExit()
	if status != 0 {
		t.Errorf("exit status %d", status)
	}
	grepSecret(t, secret, e.stateDir, s.allOutput())
}

// TestEnv_PolicyAllAndNone (docs/protocol.md §18.1): --inherit-env all
// passes the ambient variable, none passes not even PATH (only the
// open's env and the session marker), and the old boolean spelling
// --inherit-env=false means none.
func TestEnv_PolicyAllAndNone(t *testing.T) {
	secret := "sk-ambient-" + randHex(12)
	t.Setenv("ACPX_E2E_AMBIENT_API_KEY", secret)
	for _, c := range []struct {
		flag, policy string
		wantSecret   bool
		wantPath     bool
	}{{"--inherit-env=all", "all", true, true}, {"--inherit-env=none", "none", false, false}, {"--inherit-env=false", "none", false, false}} {
		t.Run(c.flag, func(t *testing.T) {
			e := newFaultEnv(t)
			s := startSidecar(t, append(seedArgs(e), c.flag)...)
			init := s.initialize(false)
			if caps, _ := init["capabilities"].(map[string]any); caps["inheritEnv"] != c.policy {
				t.Errorf("capabilities.inheritEnv = %v, want %s", caps["inheritEnv"], c.policy)
			}
			o := e.open(s, "env-"+c.policy, "")
			env := environOf(t, o.Process.Pid)
			if got := hasEntry(env, "ACPX_E2E_AMBIENT_API_KEY="+secret); got != c.wantSecret {
				t.Errorf("ambient secret present = %v, want %v", got, c.wantSecret)
			}
			if got := hasName(env, "PATH"); got != c.wantPath {
				t.Errorf("PATH present = %v, want %v", got, c.wantPath)
			}
			if !hasEntry(env, "ACPX_TEST_MARK="+e.mark) || !hasName(env, "ACPX_SIDECAR_SESSION") {
				t.Errorf("the open's env or the session marker is missing: %q", env)
			}
			seedCloseProof(t, s, o.Session, nil)
		})
	}
}
