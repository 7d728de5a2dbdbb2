package e2e

// Portable provider state through the built binary (docs/protocol.md §24,
// after the design's PROTOCOL §10.2): a session moves to another sidecar
// with another state dir through the store, ownership is fenced, a store
// that fails keeps the previous head and the local state.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// storeParams are per-turn fault-agent open params whose agent keeps its
// sessions in agentDir, published under the name "agent".
func storeParams(e *faultEnv, key, agentDir string) map[string]any {
	p := perTurnParams(e, key, agentDir, "recall")
	p["stateDirs"] = map[string]string{"agent": agentDir}
	return p
}

// moveBetweenSidecars runs one turn on sidecar A, closes (the close
// publishes), deletes A's state dir and the agent's dir whole, then opens
// the key on sidecar B — another state dir, another agent dir — which
// restores the archive, resumes the agent's session and remembers the
// first turn.
func moveBetweenSidecars(t *testing.T, storeURL string, wrapper []string) {
	key, _ := masterKeyFile(t)
	eA := newFaultEnv(t)
	agentA := agentWritableDir(t)
	sA := startSidecarVia(t, wrapper, "--state-dir", eA.stateDir, "--state-store", storeURL, "--state-key-file", key)
	sA.initialize(false)
	oA := seedMustOpen(sA, storeParams(eA, "move", agentA))
	runTurn(t, sA, oA.Session, "t1", "alpha")
	waitParked(t, sA, oA.Session, 1)
	pub := lifecyclePublication(t, sA, oA.Session, 1)
	if pub == nil || pub.State != "published" || pub.Generation < 2 || len(pub.SHA256) != 64 {
		t.Fatalf("retire publication %+v: want published", pub)
	}
	// Parked since a retire that published: the close has nothing new.
	if cp := proofPublication(t, closeRaw(t, sA, oA.Session)); cp == nil || cp.State != "skipped" || cp.Error != nil {
		t.Fatalf("close publication of a parked, published session %+v: want skipped", cp)
	}
	if _, status := sA.shutdownAndExit(); status != 0 {
		t.Fatalf("sidecar A exit %d", status)
	}
	for _, d := range []string{eA.stateDir, agentA} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}

	eB := newFaultEnv(t)
	eB.work = eA.work // the agent's session names its cwd
	agentB := agentWritableDir(t)
	sB := startSidecarVia(t, wrapper, "--state-dir", eB.stateDir, "--state-store", storeURL, "--state-key-file", key)
	sB.initialize(false)
	oB := decodeResult[storeOpen](t, "open on B", sB.call("session/open", storeParams(eB, "move", agentB)))
	if oB.Restore == nil || oB.Restore.Generation != pub.Generation || !oB.Resumed || oB.Identity.BackendSessionID != oA.Identity.BackendSessionID {
		t.Fatalf("open on B: restore %+v resumed %v backend %q; want generation %d restored and %q resumed",
			oB.Restore, oB.Resumed, oB.Identity.BackendSessionID, pub.Generation, oA.Identity.BackendSessionID)
	}
	runTurn(t, sB, oB.Session, "t2", "beta")
	if txt := turnText(sB, oB.Session, "t2"); !strings.Contains(txt, "recall: 1 earlier prompts: alpha") {
		t.Fatalf("on B the agent does not remember A's turn: %q", txt)
	}
	// The key's journal came along: session/events on B has A's updates.
	var ev struct {
		Entries []struct {
			Session string `json:"session"`
		} `json:"events"`
	}
	sB.mustCall("session/events", map[string]any{"sessionKey": "move", "afterN": 0}, &ev)
	fromA := 0
	for _, e := range ev.Entries {
		if e.Session == oA.Session {
			fromA++
		}
	}
	if fromA == 0 {
		t.Errorf("session/events on B holds none of A's %d-entry journal", len(ev.Entries))
	}
	closeRaw(t, sB, oB.Session)
	_, _ = sB.shutdownAndExit()
	waitNoMarked(t, eA.mark, eA.work, 5*time.Second)
	waitNoMarked(t, eB.mark, eB.work, 5*time.Second)
}

// TestStateStore_MovesBetweenSidecarsOverFile: the move over file://.
func TestStateStore_MovesBetweenSidecarsOverFile(t *testing.T) {
	moveBetweenSidecars(t, "file://"+t.TempDir(), nil)
}

// TestStateStore_MovesBetweenSidecarsOverS3: the move over a real S3
// server (versitygw on loopback).
func TestStateStore_MovesBetweenSidecarsOverS3(t *testing.T) {
	srv := s3Server(t)
	moveBetweenSidecars(t, srv.URL("move"), s3Wrapper(srv))
}

// TestStateStore_FailingStoreKeepsThePreviousHead: a store that answers
// 503, then one that hangs, fails the retire's publication (retryable
// STATE_STORE_UNAVAILABLE in the proof) while the session parks as usual,
// the head and the local state stay as they were, and the next retire,
// with the store back, publishes.
func TestStateStore_FailingStoreKeepsThePreviousHead(t *testing.T) {
	srv := s3Server(t)
	proxy := newFaultProxy(t, srv.Endpoint)
	key, _ := masterKeyFile(t)
	e := newFaultEnv(t)
	agent := agentWritableDir(t)
	url := strings.Replace(srv.URL("flaky"), srv.Endpoint, proxy.srv.URL, 1)
	s := startSidecarVia(t, s3Wrapper(srv), "--state-dir", e.stateDir, "--state-store", url, "--state-key-file", key,
		"--state-timeout-ms", "1500")
	s.initialize(false)
	o := seedMustOpen(s, storeParams(e, "flaky", agent))
	runTurn(t, s, o.Session, "t1", "one")
	p1 := waitParked(t, s, o.Session, 1)
	first := lifecyclePublication(t, s, o.Session, 1)
	if first == nil || first.State != "published" {
		t.Fatalf("first retire publication %+v (proof %+v)", first, p1)
	}
	for i, mode := range []int32{1, 2} {
		proxy.mode.Store(mode)
		runTurn(t, s, o.Session, "f"+string(rune('a'+i)), "more")
		waitParked(t, s, o.Session, 2+i)
		pub := lifecyclePublication(t, s, o.Session, 2+i)
		if pub == nil || pub.State != "failed" || pub.Error == nil || pub.Error.Code != "STATE_STORE_UNAVAILABLE" {
			t.Fatalf("publication with the store in mode %d: %+v, want failed STATE_STORE_UNAVAILABLE", mode, pub)
		}
		proxy.mode.Store(0)
		var head struct {
			Generation int64 `json:"generation"`
		}
		st := statusOfRaw(t, s, o.Session)
		_ = json.Unmarshal(st["store"], &head)
		if head.Generation != first.Generation {
			t.Errorf("after a failed publication the session's head is generation %d, want %d kept", head.Generation, first.Generation)
		}
		if ents, _ := os.ReadDir(agent); len(ents) == 0 {
			t.Errorf("the local provider state is gone after a failed publication")
		}
	}
	runTurn(t, s, o.Session, "t3", "last")
	waitParked(t, s, o.Session, 4)
	if pub := lifecyclePublication(t, s, o.Session, 4); pub == nil || pub.State != "published" || pub.Generation <= first.Generation {
		t.Fatalf("retire with the store back: %+v, want a newer generation published", pub)
	}
	closeRaw(t, s, o.Session)
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// lifecyclePublication is the publication of the n-th parked
// session/lifecycle's proof.
func lifecyclePublication(t *testing.T, s *sidecar, session string, n int) *publication {
	t.Helper()
	k := 0
	for _, f := range s.notesOf("session/lifecycle") {
		var l struct {
			Session string          `json:"session"`
			State   string          `json:"state"`
			Proof   json.RawMessage `json:"proof"`
		}
		if json.Unmarshal(f.Params, &l) == nil && l.Session == session && l.State == "parked" && l.Proof != nil {
			if k++; k == n {
				return proofPublication(t, l.Proof)
			}
		}
	}
	t.Fatalf("no parked notification #%d", n)
	return nil
}

// statusOfRaw is session/status as raw members.
func statusOfRaw(t *testing.T, s *sidecar, session string) map[string]json.RawMessage {
	t.Helper()
	var st map[string]json.RawMessage
	s.mustCall("session/status", map[string]any{"session": session}, &st)
	return st
}

// findHead is the one head file of a file:// store.
func findHead(t *testing.T, root string) string {
	t.Helper()
	var heads []string
	_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && filepath.Base(p) == "head" {
			heads = append(heads, p)
		}
		return nil
	})
	if len(heads) != 1 {
		t.Fatalf("store %s holds heads %v, want one", root, heads)
	}
	return heads[0]
}

// TestStateStore_SecretsReachNothing: after a full per-turn session with a
// store (two turns, two retires, a close), neither the open's env values
// nor the master key (raw, hex or base64) appear in the store's objects —
// read raw and decrypted with the key —, the state dir, the sidecar's
// logs, frames, journal or proofs.
func TestStateStore_SecretsReachNothing(t *testing.T) {
	keyPath, key := masterKeyFile(t)
	storeDir := t.TempDir()
	e := newFaultEnv(t)
	agent := agentWritableDir(t)
	secret := "sk-state-" + randHex(12)
	s := startSidecar(t, "--state-dir", e.stateDir, "--state-store", "file://"+storeDir, "--state-key-file", keyPath)
	s.initialize(false)
	p := storeParams(e, "secrets", agent)
	p["env"].(map[string]string)["PROVIDER_API_KEY"] = secret
	o := seedMustOpen(s, p)
	runTurn(t, s, o.Session, "t1", "one")
	waitParked(t, s, o.Session, 1)
	runTurn(t, s, o.Session, "t2", "two")
	waitParked(t, s, o.Session, 2)
	if pub := lifecyclePublication(t, s, o.Session, 2); pub == nil || pub.State != "published" {
		t.Fatalf("retire publication %+v", pub)
	}
	closeRaw(t, s, o.Session)
	_, _ = s.shutdownAndExit()

	// The store's archive, decrypted with the key into a scratch dir.
	restored := decryptAll(t, storeDir, key, "secrets", []string{"agent"})
	if n := countFiles(restored); n == 0 {
		t.Fatalf("the decrypted archive holds no file")
	}
	needles := []string{secret, string(key), hexOf(key), b64Of(key), b64URLOf(key)}
	for _, needle := range needles {
		grepSecret(t, needle, storeDir, s.allOutput())
		grepSecret(t, needle, restored, nil)
		grepSecret(t, needle, e.stateDir, nil)
	}
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestStateStore_CorruptArchiveFallsBackThenRefuses: a key published
// twice (two retires) whose newest archive object is damaged in the store
// is restored from the one before it on another sidecar (restore names
// that generation, and fellBack the damaged one); with both damaged the open fails STATE_CORRUPT with
// nothing launched and nothing placed in the new agent dir.
func TestStateStore_CorruptArchiveFallsBackThenRefuses(t *testing.T) {
	key, _ := masterKeyFile(t)
	storeDir := t.TempDir()
	url := "file://" + storeDir
	eA := newFaultEnv(t)
	agentA := agentWritableDir(t)
	sA := startSidecar(t, "--state-dir", eA.stateDir, "--state-store", url, "--state-key-file", key)
	sA.initialize(false)
	oA := seedMustOpen(sA, storeParams(eA, "corrupt", agentA))
	runTurn(t, sA, oA.Session, "t1", "alpha")
	waitParked(t, sA, oA.Session, 1)
	runTurn(t, sA, oA.Session, "t2", "beta")
	waitParked(t, sA, oA.Session, 2)
	_, _ = sA.shutdownAndExit() // its close publishes nothing new (parked)
	type ref struct {
		Object     string `json:"object"`
		Generation int64  `json:"generation"`
	}
	readHead := func() (archive, previous ref) {
		t.Helper()
		var head struct{ Archive, Previous ref }
		hb, err := os.ReadFile(findHead(t, storeDir))
		if err != nil || json.Unmarshal(hb, &head) != nil || head.Previous.Object == "" {
			t.Fatalf("head %s: %v", hb, err)
		}
		return head.Archive, head.Previous
	}
	damage := func(object string) {
		t.Helper()
		var found string
		_ = filepath.Walk(storeDir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() && strings.HasSuffix(p, "/"+filepath.Base(object)) {
				found = p
			}
			return nil
		})
		if found == "" {
			t.Fatalf("archive %s not found in the store", object)
		}
		b, err := os.ReadFile(found)
		if err != nil {
			t.Fatal(err)
		}
		// Cut short (damaging an object twice keeps it damaged).
		if err := os.WriteFile(found, b[:len(b)*2/3], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	open := func() (*sidecar, *frame, string) {
		e := newFaultEnv(t)
		e.work = eA.work
		agent := agentWritableDir(t)
		s := startSidecar(t, "--state-dir", e.stateDir, "--state-store", url, "--state-key-file", key)
		s.initialize(false)
		return s, s.call("session/open", storeParams(e, "corrupt", agent)), agent
	}
	newest, previous := readHead()
	damage(newest.Object)
	sB, f, _ := open()
	o := decodeResult[storeOpen](t, "open over a damaged newest archive", f)
	if o.Restore == nil || o.Restore.Generation != previous.Generation {
		t.Fatalf("restore %+v: want the previous archive, generation %d (the damaged one was %d)", o.Restore, previous.Generation, newest.Generation)
	}
	if fb := o.Restore.FellBack; fb == nil || fb.Generation != newest.Generation || fb.Error.Code != "STATE_CORRUPT" {
		t.Errorf("restore.fellBack %+v: want the damaged generation %d, STATE_CORRUPT", fb, newest.Generation)
	}
	_, _ = sB.shutdownAndExit() // its retire and close publish again
	newest, previous = readHead()
	damage(newest.Object)
	damage(previous.Object)
	_, f, agent := open()
	d := wantError(t, "open over two damaged archives", f, -32000, "STATE_CORRUPT")
	if d.Cleanup == nil || !d.Cleanup.Complete || len(d.Cleanup.Processes) != 0 {
		t.Errorf("refusal's cleanup %+v: want nothing launched", d.Cleanup)
	}
	if n := countFiles(agent); n != 0 {
		t.Errorf("%d files were placed from damaged archives", n)
	}
	waitNoMarked(t, eA.mark, eA.work, 5*time.Second)
}

// TestStateStore_PrivateHomeLeavesTheDiskBetweenTurns: a per-turn session
// of the generic profile with no HOME of its own keeps its provider state
// in the key's private HOME (its $HOME); once a retire's publication is
// read back the HOME is removed, so the parked session holds no disk
// there; the next turn's revive restores it from the store and the agent
// remembers the first turn (PROTOCOL §10.2).
func TestStateStore_PrivateHomeLeavesTheDiskBetweenTurns(t *testing.T) {
	key, _ := masterKeyFile(t)
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir, "--state-store", "file://"+t.TempDir(), "--state-key-file", key)
	s.initialize(false)
	p := e.openParams("home-turns", "recall")
	p["command"] = map[string]any{"path": faultBin, "args": []string{"--mode", "recall", "--state-dir", "~/.fa"}}
	p["lifecycle"] = "per-turn"
	o := seedMustOpen(s, p)
	home := filepath.Join(e.stateDir, "homes", "home-turns")
	if _, err := os.Stat(filepath.Join(home, ".fa")); err != nil {
		t.Fatalf("the agent keeps nothing in its private HOME %s: %v", home, err)
	}
	runTurn(t, s, o.Session, "t1", "alpha")
	waitParked(t, s, o.Session, 1) // its retire published (the HOME goes only then)
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Fatalf("the parked session's private HOME %s is still on disk (%v)", home, err)
	}
	runTurn(t, s, o.Session, "t2", "beta")
	if txt := turnText(s, o.Session, "t2"); !strings.Contains(txt, "recall: 1 earlier prompts: alpha") {
		t.Fatalf("after the restore the agent does not remember the first turn: %q", txt)
	}
	waitParked(t, s, o.Session, 2)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Fatalf("exit %d", status)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestStateStore_ProviderStateCannotReachOutside (issue 29's fresh-user
// trial): a provider-state directory the agent replaced by a link to a
// directory its sandbox forbids is not followed — the publication fails
// STATE_CONFLICT and nothing of the link's target reaches the store — and
// opens whose provider-state directory is a system directory, lies inside
// the sidecar's state dir (another key's private HOME too), or is the
// sidecar's own HOME through a link, holds the master key file or is the
// store's own directory are refused STATE_CONFLICT with nothing launched.
func TestStateStore_ProviderStateCannotReachOutside(t *testing.T) {
	key, _ := masterKeyFile(t)
	storeDir := t.TempDir()
	e := newFaultEnv(t)
	home := agentWritableDir(t)
	secret := t.TempDir()
	marker := "forbidden-" + randHex(8)
	if err := os.WriteFile(filepath.Join(secret, "s.txt"), []byte(marker), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(home, "plant.json")
	fa := filepath.Join(home, "fa")
	b, _ := json.Marshal(map[string]any{"links": []map[string]string{{"path": fa, "target": secret}}})
	if err := os.WriteFile(spec, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSidecar(t, "--state-dir", e.stateDir, "--state-store", "file://"+storeDir, "--state-key-file", key)
	s.initialize(false)
	p := e.openParams("planted", "plant="+spec)
	p["env"].(map[string]string)["HOME"] = home
	p["stateDirs"] = map[string]string{"fa": fa}
	o := seedMustOpen(s, p)
	runTurn(t, s, o.Session, "t1", "plant")
	if fi, err := os.Lstat(fa); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the agent did not plant its link at %s: %v", fa, err)
	}
	pub := proofPublication(t, closeRaw(t, s, o.Session))
	if pub == nil || pub.State != "failed" || pub.Error == nil || pub.Error.Code != "STATE_CONFLICT" {
		t.Fatalf("publication through a planted link: %+v, want failed STATE_CONFLICT", pub)
	}
	grepSecret(t, marker, storeDir, nil)

	link := filepath.Join(t.TempDir(), "home-link")
	own, _ := os.UserHomeDir()
	if err := os.Symlink(own, link); err != nil {
		t.Fatal(err)
	}
	for i, bad := range []map[string]any{
		{"stateDirs": map[string]string{"etc": "/etc"}},
		{"stateDirs": map[string]string{"sessions": filepath.Join(e.stateDir, "sessions")}},
		{"stateDirs": map[string]string{"other": filepath.Join(e.stateDir, "homes", "planted", ".fa")}}, // another key's private HOME
		{"env": map[string]string{"HOME": link, "ACPX_TEST_MARK": e.mark}},
		// The master key's directory and the store itself (adversarial
		// trial: both were archived into the store).
		{"stateDirs": map[string]string{"kdir": filepath.Dir(key)}},
		{"stateDirs": map[string]string{"store": storeDir}},
	} {
		p := e.openParams(fmt.Sprintf("refused-%d", i), "")
		for k, v := range bad {
			p[k] = v
		}
		d := wantError(t, fmt.Sprintf("open %d", i), s.call("session/open", p), -32000, "STATE_CONFLICT")
		if len(d.Paths) != 1 {
			t.Errorf("open %d: data.paths %v, want the directory refused", i, d.Paths)
		}
	}
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}
