package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseFlags: --agent defaults to codex and names an agentenv agent,
// --codex is the old name of --command, bad command lines exit 2.
func TestParseFlags(t *testing.T) {
	var out, errb bytes.Buffer
	d, _ := parseFlags(nil, &out, &errb)
	if d == nil || d.agent.Name != "codex" || d.agent.Profile != "codex" || d.override != "" {
		t.Fatalf("defaults: %+v (%s)", d, errb.String())
	}
	if abs, _ := filepath.Abs("."); d.repoRoot != abs {
		t.Errorf("repo root %q, want %q", d.repoRoot, abs)
	}
	d, _ = parseFlags([]string{"--agent", "codex-legacy", "--codex", "x/codex-acp"}, &out, &errb)
	if d == nil || d.agent.Package != "@zed-industries/codex-acp" || !filepath.IsAbs(d.override) ||
		!strings.HasSuffix(d.override, "/x/codex-acp") {
		t.Fatalf("--codex: %+v", d)
	}
	if got := promptFor("gemini"); !strings.Contains(got, "\nrun: echo hello from gemini > made.txt") {
		t.Errorf("prompt %q", got)
	}
	for _, args := range [][]string{
		{"--agent", "nope"}, {"extra"}, {"--codex", "a", "--command", "b"}, {"--bogus"},
	} {
		errb.Reset()
		if d, code := parseFlags(args, &out, &errb); d != nil || code != 2 {
			t.Errorf("parseFlags(%q) = %v, %d; want nil, 2", args, d, code)
		}
	}
}
