package adapter

import (
	"sync"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/config"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// recoveringLauncher is a fakeLauncher that also fakes recovery
// (Recoverer): its first recovery of an entry leaves the tree populated,
// the next proves it gone.
type recoveringLauncher struct {
	*fakeLauncher
	mu    sync.Mutex
	calls []reaper.Leftover
}

func (l *recoveringLauncher) Recover(containment string, lo reaper.Leftover, _ time.Duration) (reaper.Termination, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, lo)
	t := reaper.Termination{Containment: reaper.Mode(containment),
		Signals: []reaper.SignalRecord{{Signal: "SIGKILL", Target: "tree", At: time.Now()}}}
	if len(l.calls) == 1 {
		t.Verified = reaper.Verification{Method: "fake: populated"}
		t.Errors = []reaper.ErrorRecord{{Code: reaper.CodeKillTimeout, Message: "provider did not exit after SIGKILL"}}
		return t, nil
	}
	code := 0
	t.Processes = []reaper.ProcessRecord{{Pid: lo.Pid, Role: reaper.RoleProvider, ExitCode: &code, ExitedAt: time.Now()}}
	t.Verified, t.Complete = reaper.Verification{TreeEmpty: true, Method: "fake: empty"}, true
	return t, nil
}

// TestRecovery_GoesThroughTheLauncherSeam: a dead sidecar's ledger entry is
// recovered through the launch.Launcher (Recoverer) and internal/cleanup, with
// no process: the first, incomplete proof is sent, the retained retry proves
// the tree gone, and the final proof (origin "recovered", same cleanupId,
// attempts 2, only the latest termination's errors) follows; the entry is
// removed.
func TestRecovery_GoesThroughTheLauncherSeam(t *testing.T) {
	l := &recoveringLauncher{fakeLauncher: &fakeLauncher{agent: newFakeAgent()}}
	h := newRecHost()
	cfg := config.DefaultConfig()
	cfg.StateDir = t.TempDir()
	cfg.Launcher = l
	st, err := store.Open(cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	entry := store.Owned{ID: "s-dead1", SidecarPid: 1, SidecarStartTime: 1 << 62, Session: "s-dead1", SessionKey: "left",
		Pid: 4242, StartTime: 7, Pgid: 4242, MarkerSHA256: "ab", Containment: string(fakeMode), CreatedAt: store.FormatTime(time.Now())}
	if err := st.WriteOwned(entry); err != nil {
		t.Fatal(err)
	}
	m := NewManager(cfg, h)
	m.Initialized()
	final := waitNote(t, h, protocol.NotifyCleanupProof, func(n protocol.ProofNotice) bool { return n.Proof.Complete })
	p := final.Proof
	if p.Origin != protocol.OriginRecovered || p.Session != "s-dead1" || p.SessionKey != "left" || p.Attempts != 2 || len(p.Processes) != 1 {
		t.Errorf("final proof %+v", p)
	}
	if len(p.Errors) != 0 || len(p.Signals) != 1 {
		t.Errorf("final proof errors %v signals %v: want only the latest termination's facts", p.Errors, p.Signals)
	}
	var first *protocol.Proof
	for _, n := range notesOf[protocol.ProofNotice](h, protocol.NotifyCleanupProof) {
		if !n.Proof.Complete {
			first = n.Proof
		}
	}
	if first == nil || first.CleanupID != p.CleanupID || first.Attempts != 1 || len(first.Errors) != 1 {
		t.Errorf("first proof %+v: want the incomplete attempt 1 with its kill timeout, same cleanupId", first)
	}
	l.mu.Lock()
	calls := append([]reaper.Leftover(nil), l.calls...)
	l.mu.Unlock()
	if len(calls) != 2 || calls[0].Pid != 4242 || calls[0].Session != "s-dead1" || calls[0].MarkerSHA256 != "ab" {
		t.Errorf("recoveries %+v", calls)
	}
	m.Shutdown()
	m.Wait()
	if left, _ := st.ListOwned(); len(left) != 0 {
		t.Errorf("ledger entries left: %+v", left)
	}
}
