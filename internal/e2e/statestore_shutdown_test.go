package e2e

// A shutdown whose closes' publications hang on the state store
// (docs/protocol.md §24): the shutdown bound still holds, and each proof
// says what is true — the tree proven gone, the publication failed.

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// TestStateStore_ShutdownWithAStuckStoreStillProvesTheTree: a warm
// session with a store whose every request hangs (longer than the
// shutdown bound) is shut down. The shutdown answers within its bound;
// the session's proof is complete — its tree was proven gone before the
// publication started — and says the publication failed
// (STATE_STORE_UNAVAILABLE), not that the cleanup is incomplete; no
// provider process is left, and the local provider state stays.
func TestStateStore_ShutdownWithAStuckStoreStillProvesTheTree(t *testing.T) {
	srv := s3Server(t)
	proxy := newFaultProxy(t, srv.Endpoint)
	key, _ := masterKeyFile(t)
	e := newFaultEnv(t)
	agent := agentWritableDir(t)
	url := strings.Replace(srv.URL("stuck"), srv.Endpoint, proxy.srv.URL, 1)
	s := startSidecarVia(t, s3Wrapper(srv), "--state-dir", e.stateDir, "--state-store", url, "--state-key-file", key,
		"--state-timeout-ms", "60000", "--shutdown-ms", "4000")
	s.initialize(false)
	p := storeParams(e, "stuck", agent)
	p["lifecycle"] = "warm"
	o := seedMustOpen(s, p)
	runTurn(t, s, o.Session, "t1", "one")

	proxy.mode.Store(2) // every store request hangs from now on
	t.Cleanup(func() { proxy.mode.Store(0) })
	var res struct {
		Proofs []json.RawMessage `json:"proofs"`
	}
	began := time.Now()
	s.mustCall("shutdown", map[string]any{}, &res)
	took := time.Since(began)
	s.send(map[string]any{"jsonrpc": "2.0", "method": "exit"})
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("sidecar did not exit after exit")
	}
	if took > 30*time.Second {
		t.Errorf("shutdown took %v with a 4 s bound", took) // a generous ceiling, not a timing claim
	}
	if len(res.Proofs) != 1 {
		t.Fatalf("shutdown proofs %d, want the session's one: %s", len(res.Proofs), res.Proofs)
	}
	var pr proof
	if err := json.Unmarshal(res.Proofs[0], &pr); err != nil {
		t.Fatal(err)
	}
	if !pr.Complete || !pr.Verified.TreeEmpty || len(pr.Processes) == 0 {
		t.Fatalf("shutdown proof %s: want complete, the tree proven empty, its processes", res.Proofs[0])
	}
	pub := proofPublication(t, res.Proofs[0])
	if pub == nil || pub.State != "failed" || pub.Error == nil || pub.Error.Code != "STATE_STORE_UNAVAILABLE" {
		t.Fatalf("shutdown proof's publication %+v, want failed STATE_STORE_UNAVAILABLE", pub)
	}
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
	if ents, _ := os.ReadDir(agent); len(ents) == 0 {
		t.Errorf("the local provider state is gone after a shutdown whose publication failed")
	}
}
