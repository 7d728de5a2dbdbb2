package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestSandbox_StateStoreAndKeyAreKeptFromAgents (docs/protocol.md §19;
// found by a user trial: an agent whose cwd held a file:// store rewrote
// and renamed another key's published state, and any workspace agent read
// the master key): a sidecar with a file:// store and its master key both
// inside a sandboxed agent's cwd. That agent cannot write the store, move
// a key's objects or the store away, read, overwrite or replace the key
// file, nor rename its directory — under the default workspace sandbox
// and under strict — while the rest of its cwd stays writable; the
// store's root is in its sandbox.readOnly. Another key's per-turn session
// publishes before and after, unfenced, its head untouched by the agent.
func TestSandbox_StateStoreAndKeyAreKeptFromAgents(t *testing.T) {
	root := realDir(t, t.TempDir())
	store, keyDir := filepath.Join(root, "store"), filepath.Join(root, "keys")
	if err := os.Mkdir(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The key file lies in the agents' cwd, next to the store.
	generated, keyBytes := masterKeyFile(t)
	key := filepath.Join(keyDir, "state.key")
	if err := os.Rename(generated, key); err != nil {
		t.Fatal(err)
	}
	e := newFaultEnv(t)
	agent := agentWritableDir(t)
	s := startSidecar(t, "--state-dir", e.stateDir, "--state-store", "file://"+store, "--state-key-file", key)
	s.initialize(false)

	victim := seedMustOpen(s, storeParams(e, "victim", agent))
	runTurn(t, s, victim.Session, "v1", "before the agent")
	waitParked(t, s, victim.Session, 1)
	if pub := lifecyclePublication(t, s, victim.Session, 1); pub == nil || pub.State != "published" {
		t.Fatalf("the victim's first retire: %+v, want published", pub)
	}
	head := findHead(t, store)
	before, err := os.ReadFile(head)
	if err != nil {
		t.Fatal(err)
	}
	keyObjects := filepath.Dir(head)

	var sessions []string
	for i, fs := range []string{"workspace", "strict"} {
		p := e.openParams("agent-"+fs, "probe")
		p["cwd"] = root
		if fs == "strict" {
			p["sandbox"] = map[string]any{"filesystem": "strict"}
		}
		var o sandboxOpen
		s.mustCall("session/open", p, &o)
		sessions = append(sessions, o.Session)
		if o.Sandbox == nil || !o.Sandbox.Enforced || !slices.Contains(o.Sandbox.ReadOnly, store) {
			t.Fatalf("%s: sandbox %+v, want it enforced with %s read-only", fs, o.Sandbox, store)
		}
		n := string(rune('a' + i))
		refused := map[string][]string{
			"write " + head: {"EROFS"},
			"write " + filepath.Join(store, "planted-"+n):      {"EROFS"},
			"rename " + keyObjects + " " + root + "/gone-" + n: {"EROFS", "EXDEV", "EBUSY"},
			"rename " + store + " " + root + "/store-" + n:     {"EBUSY"},
			"read " + key:  {"EACCES"},
			"write " + key: {"EACCES", "EROFS"},
			"rename " + key + " " + root + "/stolen-" + n: {"EBUSY", "EXDEV"},
			"replace " + key: {"EBUSY"},
			"rename " + keyDir + " " + root + "/keys-" + n: {"EBUSY"},
			"write " + filepath.Join(root, "fine-"+n):      {"ok"},
		}
		lines := make([]string, 0, len(refused))
		for l := range refused {
			lines = append(lines, l)
		}
		slices.Sort(lines)
		got := probeTurn(t, s, o.Session, "p-"+fs, lines...)
		for _, l := range lines {
			if !slices.Contains(refused[l], got[l]) {
				t.Errorf("%s: probe %q => %q, want one of %v", fs, l, got[l], refused[l])
			}
		}
	}
	if b, err := os.ReadFile(key); err != nil || string(b) != string(keyBytes) {
		t.Errorf("the key file after the agents: %q, %v", b, err)
	}
	if now, err := os.ReadFile(head); err != nil || string(now) != string(before) {
		t.Errorf("the victim's head changed under the agents (%v)", err)
	}
	requireAbsent(t, filepath.Join(store, "planted-a"), filepath.Join(store, "planted-b"), filepath.Join(root, "stolen-a"),
		filepath.Join(root, "gone-a"), filepath.Join(root, "store-a"))

	runTurn(t, s, victim.Session, "v2", "after the agent")
	waitParked(t, s, victim.Session, 2)
	if pub := lifecyclePublication(t, s, victim.Session, 2); pub == nil || pub.State != "published" || pub.Error != nil {
		t.Fatalf("the victim's second retire: %+v, want published", pub)
	}
	closeAllClean(t, s, e, append(sessions, victim.Session)...)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}
