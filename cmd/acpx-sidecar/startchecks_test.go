package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestStartupChecks_SayWhatWouldFailLater (issue 33): a TMPDIR that does
// not exist, a relative one and a world-writable state dir each get their
// own warning at start; a sound environment gets none.
func TestStartupChecks_SayWhatWouldFailLater(t *testing.T) {
	run := func(tmpdir, stateDir string) []string {
		t.Helper()
		t.Setenv("TMPDIR", tmpdir)
		core, logs := observer.New(zapcore.WarnLevel)
		startupChecks(zap.New(core), stateDir)
		var out []string
		for _, e := range logs.All() {
			out = append(out, e.Message)
		}
		return out
	}
	good := t.TempDir()
	if got := run(good, filepath.Join(good, "state")); len(got) != 0 {
		t.Errorf("a sound environment got warnings: %q", got)
	}
	if got := run("/nonexistent-acpx-tmp", good); len(got) != 1 || !strings.Contains(got[0], "TMPDIR is not an existing directory") {
		t.Errorf("missing TMPDIR: %q", got)
	}
	if got := run("rel/tmp", good); len(got) != 1 || !strings.Contains(got[0], "TMPDIR is a relative path") {
		t.Errorf("relative TMPDIR: %q", got)
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if got := run(good, open); len(got) != 1 || !strings.Contains(got[0], "writable by every user") {
		t.Errorf("world-writable state dir: %q", got)
	}
	if got := run(good, filepath.Join(open, "not-yet")); len(got) != 1 || !strings.Contains(got[0], "writable by every user") {
		t.Errorf("a state dir to be made in a world-writable dir: %q", got)
	}
}
