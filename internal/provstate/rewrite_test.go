package provstate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
)

// TestRewriteRestoredPaths_PiSessionMapFollowsTheMove: pi-acp's session map
// restored under another HOME names session files at the old HOME; after
// the rewrite each names the same file under the new pi agent dir — even
// when the old path exists here (another key's HOME) —, a path with no
// tail under it is left alone, and a tail reached through a link is never
// taken (docs/agents.md, Pi; docs/protocol.md §24).
func TestRewriteRestoredPaths_PiSessionMapFollowsTheMove(t *testing.T) {
	prof, _ := profiles.Lookup("pi")
	oldHome, newHome := filepath.Join(t.TempDir(), "a", "home"), filepath.Join(t.TempDir(), "b", "home")
	agent, acpDir := filepath.Join(newHome, ".pi", "agent"), filepath.Join(newHome, ".pi", "pi-acp")
	rel := filepath.Join("sessions", "--work--", "2026_s1.jsonl")
	write := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(agent, rel), "{}\n")
	write(filepath.Join(oldHome, ".pi", "agent", rel), "{}\n") // the old place exists here too
	kept := filepath.Join(newHome, "elsewhere.jsonl")
	write(kept, "{}\n")
	// s3's tail exists only behind a link: not followed.
	outside := t.TempDir()
	write(filepath.Join(outside, "x.jsonl"), "{}\n")
	if err := os.Symlink(outside, filepath.Join(agent, "linked")); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{"version": 1, "sessions": map[string]any{
		"s1": map[string]any{"sessionId": "s1", "cwd": "/work", "sessionFile": filepath.Join(oldHome, ".pi", "agent", rel)},
		"s2": map[string]any{"sessionId": "s2", "cwd": "/work", "sessionFile": kept},
		"s3": map[string]any{"sessionId": "s3", "cwd": "/work", "sessionFile": filepath.Join(oldHome, ".pi", "agent", "linked", "x.jsonl")},
	}}
	b, _ := json.Marshal(m)
	write(filepath.Join(acpDir, "session-map.json"), string(b))
	srcs := []statestore.Source{{Name: "pi-agent", Path: agent}, {Name: "pi-acp", Path: acpDir}}
	changed, err := rewriteRestoredPaths(prof, srcs)
	if err != nil || len(changed) != 1 {
		t.Fatalf("changed %v, %v", changed, err)
	}
	var got struct {
		Sessions map[string]struct {
			SessionFile string `json:"sessionFile"`
		} `json:"sessions"`
	}
	raw, _ := os.ReadFile(filepath.Join(acpDir, "session-map.json"))
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if f := got.Sessions["s1"].SessionFile; f != filepath.Join(agent, rel) {
		t.Errorf("s1 %q, want %q", f, filepath.Join(agent, rel))
	}
	if f := got.Sessions["s2"].SessionFile; f != kept {
		t.Errorf("s2 %q: a path with no tail under the agent dir must be kept", f)
	}
	if f := got.Sessions["s3"].SessionFile; f != m["sessions"].(map[string]any)["s3"].(map[string]any)["sessionFile"] {
		t.Errorf("s3 %q: a tail behind a link must not be taken", f)
	}
	// Nothing left to rewrite: the file is not written again.
	if changed, err := rewriteRestoredPaths(prof, srcs); err != nil || len(changed) != 0 {
		t.Errorf("second pass changed %v, %v", changed, err)
	}
}
