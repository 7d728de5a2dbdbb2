package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestSandbox_SidecarInstallationIsNeverWritable: the sidecar's own
// executable is never writable from inside a sandbox (docs/protocol.md
// §19), and the sidecar never re-executes the file at its path. A copy of
// the sidecar runs from a directory that is the sandboxed agent's cwd: the
// agent's write and rename over that executable fail and its bytes stay
// the same (the open result keeps it read-only). Then the file at that
// path is replaced from outside by a program that leaves a file when run:
// the next opens (subreaper: a guardian re-executed per open; a sandboxed
// one: its launch entry) still work and never run it, because the sidecar
// re-executes its running image (/proc/self/exe).
func TestSandbox_SidecarInstallationIsNeverWritable(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "acpx-sidecar")
	orig, err := os.ReadFile(sidecarBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, orig, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startSidecarBin(t, bin, "--state-dir", e.stateDir, "--containment", "subreaper")
	s.initialize(false)
	p := e.openParams("self-install", "probe")
	p["cwd"] = dir
	p["env"] = map[string]string{"ACPX_TEST_MARK": e.mark, "HOME": t.TempDir()}
	var o sandboxOpen
	s.mustCall("session/open", p, &o)
	if o.Sandbox == nil || !o.Sandbox.Enforced {
		t.Fatalf("sandbox %+v, want the default enforced", o.Sandbox)
	}
	real := realDir(t, dir)
	found := false
	for _, r := range o.Sandbox.ReadOnly {
		found = found || r == filepath.Join(real, "acpx-sidecar")
	}
	if !found {
		t.Errorf("readOnly %v lacks the sidecar's executable", o.Sandbox.ReadOnly)
	}
	got := probeTurn(t, s, o.Session, "t1", "write "+bin, "replace "+bin)
	for line, res := range got {
		if res == "ok" {
			t.Errorf("probe %q: ok, want refused", line)
		}
	}
	if now, _ := os.ReadFile(bin); !bytes.Equal(now, orig) {
		t.Fatalf("the agent changed the sidecar's executable")
	}
	closeClean(t, s, o.Session, e.mark, e.work)

	// The file at the sidecar's path replaced from outside.
	ran := filepath.Join(t.TempDir(), "ran")
	evil := filepath.Join(dir, "evil")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\necho \"$@\" > "+ran+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(evil, bin); err != nil {
		t.Fatal(err)
	}
	for i, sb := range []map[string]any{nil, {"filesystem": "off", "network": "none"}} {
		q := e.openParams("self-install-"+strconv.Itoa(i+2), "normal")
		if sb != nil {
			q["sandbox"] = sb
		}
		var o2 openResult
		s.mustCall("session/open", q, &o2)
		runTurn(t, s, o2.Session, "t2", "hi")
		closeClean(t, s, o2.Session, e.mark, e.work)
	}
	if b, err := os.ReadFile(ran); err == nil {
		t.Fatalf("the sidecar ran the file now at its path: %q", b)
	}
}
