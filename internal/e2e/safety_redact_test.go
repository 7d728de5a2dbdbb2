package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedact_AgentQuotingItsSecretIsRedactedInFramesAndJournal: an agent
// that prints an env value of its open (here through a probe running
// printenv) gets "[redacted]" in place of it in the session/update the
// host receives and in the key's journal; no spelling of the value (raw
// or JSON-escaped: it holds a quote and a non-ASCII rune) is anywhere in
// the state dir or the sidecar's output (docs/protocol.md §13, §16:
// secrets never appear in the journal; found by a fresh-user trial).
func TestRedact_AgentQuotingItsSecretIsRedactedInFramesAndJournal(t *testing.T) {
	const secret = "tok\"en-7f3e-é-redact"
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	p := e.openParams("quoted", "probe")
	p["env"].(map[string]string)["QUOTED_SECRET"] = secret
	var o openResult
	s.mustCall("session/open", p, &o)
	got := probeTurn(t, s, o.Session, "t1", "exec printenv QUOTED_SECRET")
	if res := got["exec printenv QUOTED_SECRET"]; !strings.Contains(res, "[redacted]") {
		t.Errorf("probe result %q, want the value redacted", res)
	}
	closeProof(s, o.Session, nil)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	enc, _ := json.Marshal(secret)
	forms := []string{secret, string(enc[1 : len(enc)-1]), `tok\"en-7f3e-\u00e9-redact`}
	for _, f := range forms {
		grepSecret(t, f, e.stateDir, s.allOutput())
	}
	names, _ := filepath.Glob(filepath.Join(e.stateDir, "sessions", "quoted.journal*.ndjson"))
	if len(names) == 0 {
		t.Fatal("no journal")
	}
	b, _ := os.ReadFile(names[0])
	if !bytes.Contains(b, []byte("[redacted]")) {
		t.Errorf("the journal has no redacted update: the test proves nothing")
	}
}
