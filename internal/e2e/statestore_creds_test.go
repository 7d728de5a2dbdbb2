package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStateStore_CredentialsNeverReachAnAgent (docs/protocol.md §24; a
// user trial found the agent printing AWS_SECRET_ACCESS_KEY into its
// journal): a sidecar whose S3 store takes its credentials from its own
// environment, run with --inherit-env all, gives an agent none of the
// store's credential variables — not through the policy, not through an
// inheritEnv name — while an open's own env still sets one, and
// AWS_REGION (no credential) still passes. The store's secret key, read
// by the agent from a file it can reach, is "[redacted]" in the frames
// and the journal, and no byte of the key pair is in the state dir, the
// frames or the sidecar's log.
func TestStateStore_CredentialsNeverReachAnAgent(t *testing.T) {
	srv := s3Server(t)
	key, _ := masterKeyFile(t)
	e := newFaultEnv(t)
	leak := filepath.Join(e.work, "leaked-credentials")
	if err := os.WriteFile(leak, []byte(srv.SecretKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startSidecarVia(t, s3Wrapper(srv), seedArgs(e, "--inherit-env", "all", "--state-store", srv.URL("creds"),
		"--state-key-file", key)...)
	s.initialize(false)
	p := e.openParams("creds", "probe")
	// Named here, the access key id would also be redacted as an inherited
	// value; the secret key is left to the store's own redaction.
	p["inheritEnv"] = []string{"AWS_ACCESS_KEY_ID"}
	p["env"].(map[string]string)["AWS_PROFILE"] = "host-own-profile"
	var o openResult
	s.mustCall("session/open", p, &o)
	env := environOf(t, o.Process.Pid)
	for _, n := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"} {
		if hasName(env, n) {
			t.Errorf("the store's %s reached the agent's environment", n)
		}
	}
	if !hasEntry(env, "AWS_REGION="+srv.Region) || !hasEntry(env, "AWS_PROFILE=host-own-profile") {
		t.Errorf("AWS_REGION (inherited) or the open's own AWS_PROFILE is missing from the agent's environment")
	}
	got := probeTurn(t, s, o.Session, "t1", "exec printenv AWS_SECRET_ACCESS_KEY", "exec cat "+leak)
	if r := got["exec printenv AWS_SECRET_ACCESS_KEY"]; !strings.HasPrefix(r, "exit ") {
		t.Errorf("printenv AWS_SECRET_ACCESS_KEY in the agent: %q, want it unset", r)
	}
	if r := got["exec cat "+leak]; !strings.Contains(r, "[redacted]") {
		t.Errorf("the agent's output of the store's secret key is %q, want it redacted", r)
	}
	closeRaw(t, s, o.Session)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	for _, secret := range []string{srv.SecretKey, srv.AccessKey} {
		grepSecret(t, secret, e.stateDir, s.allOutput())
	}
	names, _ := filepath.Glob(filepath.Join(e.stateDir, "sessions", "creds.journal*.ndjson"))
	if len(names) == 0 {
		t.Fatal("no journal")
	}
	if b, _ := os.ReadFile(names[0]); !bytes.Contains(b, []byte("[redacted]")) {
		t.Errorf("the journal has no redacted update: the test proves nothing")
	}
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}
