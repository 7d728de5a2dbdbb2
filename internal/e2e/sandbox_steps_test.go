package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sandboxResult is the open result's `sandbox` (docs/protocol.md §19).
type sandboxResult struct {
	Enforced    bool            `json:"enforced"`
	Filesystem  string          `json:"filesystem"`
	Network     json.RawMessage `json:"network"`
	Signals     string          `json:"signals"`
	LandlockABI int             `json:"landlockAbi"`
	Writable    []string        `json:"writable"`
	Readable    []string        `json:"readable"`
	ReadOnly    []string        `json:"readOnly"`
	TmpDir      string          `json:"tmpDir"`
	Home        string          `json:"home"`
	Reason      string          `json:"reason"`
	// The layers against root (docs/protocol.md §19).
	Processes    string `json:"processes"`
	Capabilities string `json:"capabilities"`
	Seccomp      bool   `json:"seccomp"`
}

// sandboxOpen is what the sandbox tests read of an open result.
type sandboxOpen struct {
	Session string `json:"session"`
	Process struct {
		Pid int `json:"pid"`
	} `json:"process"`
	Sandbox *sandboxResult `json:"sandbox"`
}

// openProbe opens a fault agent in mode probe with HOME home, and sandbox
// (nil: the sidecar's default); it fails the test on an error.
func (e *faultEnv) openProbe(s *sidecar, key, home string, sandbox map[string]any) sandboxOpen {
	s.t.Helper()
	p := e.openParams(key, "probe")
	p["env"] = map[string]string{"ACPX_TEST_MARK": e.mark, "HOME": home}
	if sandbox != nil {
		p["sandbox"] = sandbox
	}
	var o sandboxOpen
	s.mustCall("session/open", p, &o)
	if o.Session == "" || o.Sandbox == nil {
		s.t.Fatalf("open %s: %+v, want a session with a sandbox result", key, o)
	}
	return o
}

// probeTurn runs one turn of probe lines and returns each line's result
// ("probe <line> => <result>" chunks), by line.
func probeTurn(t *testing.T, s *sidecar, session, requestID string, lines ...string) map[string]string {
	t.Helper()
	runTurn(t, s, session, requestID, strings.Join(lines, "\n"))
	out := map[string]string{}
	for _, u := range updatesOf(s, session) {
		if u.RequestID == nil || *u.RequestID != requestID {
			continue
		}
		var up struct {
			Kind    string `json:"sessionUpdate"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(u.Update, &up) != nil || up.Kind != "agent_message_chunk" {
			continue
		}
		if rest, ok := strings.CutPrefix(up.Content.Text, "probe "); ok {
			if line, res, ok := strings.Cut(rest, " => "); ok {
				out[line] = res
			}
		}
	}
	for _, l := range lines {
		if _, ok := out[l]; !ok {
			t.Fatalf("turn %s: no result for probe %q (got %v)", requestID, l, out)
		}
	}
	return out
}

// wantProbes checks each probe's result against want (a result, or
// "denied": EACCES or EPERM).
func wantProbes(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for line, w := range want {
		g := got[line]
		ok := g == w
		if w == "denied" {
			ok = g == "EACCES" || g == "EPERM"
		}
		if !ok {
			t.Errorf("probe %q => %q, want %s", line, g, w)
		}
	}
}

// requireAbsent fails if any of paths exists.
func requireAbsent(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists (%v): a write outside the sandbox got through", p, err)
		}
	}
}

// waitGone waits (with a deadline) until path no longer exists.
func waitGone(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after %s", path, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// realDir is dir with its symlinks resolved (the sandbox reports real
// paths).
func realDir(t *testing.T, dir string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// closeAllClean closes every session (their agents share e's marker),
// requires complete proofs, then requires that no process of the test is
// left.
func closeAllClean(t *testing.T, s *sidecar, e *faultEnv, sessions ...string) {
	t.Helper()
	for _, id := range sessions {
		if p := closeProof(s, id, nil); !p.Complete || !p.Verified.TreeEmpty {
			t.Fatalf("close proof of %s not complete: %+v", id, p)
		}
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
