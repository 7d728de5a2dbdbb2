package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestVersion_FlagAndInitializeAgree: `--version` prints "acpx-sidecar
// <version>" and initialize reports the same version in serverInfo (one
// value, set at build time: internal/buildinfo).
func TestVersion_FlagAndInitializeAgree(t *testing.T) {
	out, err := runTracked(exec.Command(sidecarBin, "--version"))
	if err != nil {
		t.Fatal(err)
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "acpx-sidecar ")
	if !ok || v == "" || strings.ContainsAny(v, " \n") {
		t.Fatalf("--version printed %q, want \"acpx-sidecar <version>\"", out)
	}
	s := startSidecar(t, "--state-dir", t.TempDir())
	init := s.initialize(false)
	info, _ := init["serverInfo"].(map[string]any)
	if info["name"] != "acpx-sidecar" || info["version"] != v {
		t.Fatalf("serverInfo %v, want acpx-sidecar %s", info, v)
	}
}
