package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
)

// TestRun_BadFlagsExitTwo: docs/protocol.md §2 Command line — bad
// command-line flags exit 2 and write nothing to stdout (stdout carries
// frames only).
func TestRun_BadFlagsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"--framing=xml"}, {"--max-frame-bytes=10"}, {"--state-dir=relative"}, {"--handshake-timeout-ms=0"},
		{"--containment=magic"}, {"--log-level=loud"}, {"--retained-retry-min-ms=50", "--retained-retry-max-ms=10"},
		{"--protocol-close-attempts=0"}, {"extra-arg"}, {"--no-such-flag"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
		if out.Len() != 0 {
			t.Errorf("%v: wrote to stdout: %q", args, out.String())
		}
	}
}

// TestRun_DoctorReportsMechanisms: `doctor` prints JSON naming each
// containment mechanism with a reason.
func TestRun_DoctorReportsMechanisms(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"doctor"}, strings.NewReader(""), &out, &errb)
	var rep struct {
		Containment string `json:"containment"`
		Mechanisms  []struct {
			Mode      string `json:"mode"`
			Available bool   `json:"available"`
			Reason    string `json:"reason"`
		} `json:"mechanisms"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("doctor output is not JSON: %v: %q", err, out.String())
	}
	if len(rep.Mechanisms) != 4 || rep.Mechanisms[3].Mode != "process-table" {
		t.Fatalf("doctor lists %d mechanisms, want cgroup, subreaper, process-group, process-table", len(rep.Mechanisms))
	}
	for _, m := range rep.Mechanisms {
		if m.Reason == "" {
			t.Errorf("%s has no reason", m.Mode)
		}
	}
	if (code == 0) != (rep.Containment != "") {
		t.Errorf("exit %d with containment %q", code, rep.Containment)
	}
}

// TestRun_DoctorAgreesWithTheDaemon: `doctor` with a flag set the daemon
// refuses (exit 2) exits 1 and says why; one the daemon starts with under
// auto (falling back from an unusable --cgroup-parent) exits 0 and names
// the mode the daemon would pick.
func TestRun_DoctorAgreesWithTheDaemon(t *testing.T) {
	if reaper.CheckCgroupParent("") != nil {
		t.Skip("no cgroup v2 here: nothing to disagree about")
	}
	for _, c := range []struct {
		args []string
		code int
		mode string
	}{
		{[]string{"--containment=cgroup", "--cgroup-parent=/nonexistent/x"}, 1, ""},
		{[]string{"--cgroup-parent=/nonexistent/x"}, 0, "subreaper"},
		{[]string{"--containment=process-table", "--default-pids=10"}, 1, "process-table"},
		{nil, 0, "cgroup"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"doctor"}, c.args...), strings.NewReader(""), &out, &errb)
		var rep struct {
			Containment string   `json:"containment"`
			Problems    []string `json:"problems"`
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%v: not JSON: %v", c.args, err)
		}
		if code != c.code || rep.Containment != c.mode {
			t.Errorf("%v: exit %d containment %q, want %d %q (problems %q)", c.args, code, rep.Containment, c.code, c.mode, rep.Problems)
		}
		if c.code != 0 && len(rep.Problems) == 0 {
			t.Errorf("%v: refused without a problem named", c.args)
		}
	}
}

// TestParseFlags_RelativeHomeMeansNoDefaultStateDir: a relative $HOME is
// one that cannot be found (docs/protocol.md §2): no default state dir,
// and no error naming --state-dir, which was never passed.
func TestParseFlags_RelativeHomeMeansNoDefaultStateDir(t *testing.T) {
	t.Setenv("HOME", "relative")
	var errb bytes.Buffer
	o, err := parseFlags(nil, &errb)
	if err != nil || o.stateDir != "" {
		t.Fatalf("HOME=relative: %v, stateDir %q; want no error and no default", err, o.stateDir)
	}
}

// TestParseFlags_RemovedReconcileFlagStillStarts: the removed
// --late-close-reconcile-attempts is accepted (and ignored) so an
// operator's old command line keeps starting.
func TestParseFlags_RemovedReconcileFlagStillStarts(t *testing.T) {
	var errb bytes.Buffer
	o, err := parseFlags([]string{"--late-close-reconcile-attempts", "3", "--state-dir", "/tmp/x"}, &errb)
	if err != nil || o.bounds.lateReconcile != 3 {
		t.Fatalf("%v (lateReconcile %d), want accepted", err, o.bounds.lateReconcile)
	}
}

// TestRun_DoctorChecksTheStateStoreFlags: doctor loads the key files and
// opens the store as the daemon does at start: a key file readable by
// others, or not 32 bytes, is a problem and exit 1 (the daemon exits 2 on
// them; doctor said "problems": [] — fresh-user trial); a good one with a
// file:// store is fine; the key's bytes never appear.
func TestRun_DoctorChecksTheStateStoreFlags(t *testing.T) {
	dir := t.TempDir()
	key := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := bytes.Repeat([]byte("k"), 32)
	store := "file://" + filepath.Join(dir, "store")
	// A store that opens but cannot be read now (its keys/ is a file): a
	// problem, yet the daemon would start — exit 0 (a user trial found
	// doctor silent about an unreachable store).
	broken := filepath.Join(dir, "broken")
	if err := os.MkdirAll(broken, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "keys"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, keyFile, want, store string
		code                       int
	}{
		{"readable by others", key("open", good, 0o644), "0644", store, 1},
		{"31 bytes", key("short", good[:31], 0o600), "31 bytes", store, 1},
		{"a good key", key("good", good, 0o600), "", store, 0},
		{"an unreadable store", key("good2", good, 0o600), "cannot be reached now", "file://" + broken, 0},
	} {
		var out, errb bytes.Buffer
		code := run([]string{"doctor", "--state-store", c.store, "--state-key-file", c.keyFile}, strings.NewReader(""), &out, &errb)
		var rep struct {
			Problems []string `json:"problems"`
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%s: not JSON: %v: %s", c.name, err, errb.String())
		}
		joined := strings.Join(rep.Problems, "\n")
		if c.want != "" && !strings.Contains(joined, c.want) {
			t.Errorf("%s: problems %q, want one naming %q", c.name, rep.Problems, c.want)
		}
		if c.code == 0 && c.want == "" && len(rep.Problems) != 0 {
			t.Errorf("%s: problems %q", c.name, rep.Problems)
		}
		if c.code == 0 && code != 0 {
			t.Errorf("%s: exit %d, want 0", c.name, code)
		}
		if c.code == 1 && code != 1 {
			t.Errorf("%s: exit %d, want 1", c.name, code)
		}
		if strings.Contains(out.String()+errb.String(), string(good)) {
			t.Errorf("%s: the key's bytes were printed", c.name)
		}
	}
}
