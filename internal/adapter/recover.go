package adapter

import (
	"os"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Initialized sweeps the default stateDir's ownership ledger once the host
// has the initialize result; other stateDirs are swept when first used.
// Once every entry found now has had its first recovery attempt, the
// cgroups dead sidecars left populated are swept too, ledger entry or not
// (reaper.SweepDeadParents): an agent that deleted its own entry and
// killed the sidecar and its watchdog is found there.
func (m *Manager) Initialized() {
	stores := m.sh.Stores.Initialize()
	if n := registry.RemoveStaleTmpSpares(); n > 0 {
		m.sh.Log.Info("removed stale spare TMPDIRs (a stopped sidecar's, or too old for a live one to use)", zap.Int("count", n))
	}
	var first sync.WaitGroup
	for _, st := range stores {
		m.sweepLedger(st, &first)
	}
	if m.sh.Config.StateDir != "" {
		if _, err := m.storeForSweep(m.sh.Config.StateDir, &first); err != nil {
			m.sh.Log.Warn("default state directory unusable", zap.Error(err))
		}
	}
	m.sweepCgroupsAfter(&first)
	m.startSweeper() // sweep.go: a live sidecar sweeps its dead neighbours too
}

// sweepCgroupsAfter sweeps the cgroups dead sidecars left (cgroup
// containment only) once first is done: every ledger entry found had its
// first recovery attempt.
func (m *Manager) sweepCgroupsAfter(first *sync.WaitGroup) {
	if m.sh.Config.Launcher == nil || m.sh.Config.Launcher.Mode() != reaper.ModeCgroup {
		return
	}
	m.retained.Add(1)
	go func() {
		defer m.retained.Done()
		first.Wait()
		for _, c := range reaper.SweepDeadParents(m.sh.Config.Bounds.KillGrace) {
			m.sh.Log.Warn("killed a populated cgroup of a dead sidecar (no ledger entry recovered it)",
				zap.String("cgroup", c.Dir), zap.Ints("pids", c.Pids), zap.Bool("removed", c.Removed))
		}
	}()
}

// ownerAlive reports whether the sidecar that wrote o still runs.
func ownerAlive(o store.Owned) bool {
	if o.SidecarPid == os.Getpid() {
		return true
	}
	start, alive := proctable.StartTime(o.SidecarPid)
	if !alive {
		return false
	}
	return o.SidecarStartTime == 0 || start == o.SidecarStartTime
}

// sweepLedger kills the leftovers of dead sidecars found in st's ledger
// and reports each as a cleanup/proof with origin "recovered"
// (docs/operations.md, "The ownership ledger"), in a goroutine owned by
// the manager's retained group; first (may be nil) is done once every
// entry found has had its first recovery attempt. Caller holds m.mu or is
// the only user of st.
func (m *Manager) sweepLedger(st *store.Store, first *sync.WaitGroup) {
	m.retained.Add(1)
	if first != nil {
		first.Add(1)
	}
	go func() {
		defer m.retained.Done()
		var entries sync.WaitGroup
		defer func() {
			if first != nil {
				go func() { entries.Wait(); first.Done() }()
			}
		}()
		if n := st.RemoveStaleTemps(time.Minute); n > 0 {
			m.sh.Log.Info("removed temp files of interrupted writes", zap.Int("count", n))
		}
		owned, err := st.ListOwned()
		if err != nil {
			m.sh.Log.Warn("ownership ledger partly unreadable", zap.Error(err))
		}
		for _, o := range owned {
			if ownerAlive(o) || !m.recovering.Begin(o.ID) {
				continue // a live owner's, or recovered now by an earlier sweep
			}
			m.retained.Add(1)
			entries.Add(1)
			go func(o store.Owned) {
				defer m.retained.Done()
				defer m.recovering.End(o.ID)
				m.recoverEntry(st, o, entries.Done)
			}(o)
		}
	}()
}

// recoverEntry recovers one dead sidecar's ledger entry. An incomplete
// recovery is reported, then retried with the retained backoff until it is
// proven or the sidecar stops; the final proof (same cleanupId, attempts
// counted) follows as another cleanup/proof. An entry that names nothing
// recovery can prove (reaper.ErrUnprovable: no marker digest, a malformed
// session id) is reported in the log and removed: no process is killed and
// no proof sent for it. firstDone is called after the first attempt.
func (m *Manager) recoverEntry(st *store.Store, o store.Owned, firstDone func()) {
	// The same seam as a live tree's cleanup: a Job whose Terminator is
	// the leftover's recovery, then the retained retry.
	end := m.leftoverTerminator(o)
	proof, err := cleanup.Run(cleanup.Job{Target: cleanup.Target{Session: o.Session, SessionKey: o.SessionKey,
		Reason: "leftover of sidecar pid " + strconv.Itoa(o.SidecarPid), Origin: protocol.OriginRecovered,
		Containment: reaper.Mode(o.Containment)}, Terminate: end})
	firstDone()
	if err != nil {
		m.sh.Log.Warn("ownership ledger entry refused: it names nothing recovery can prove (no process killed, no proof sent)",
			zap.String("entry", o.ID), zap.Error(err))
		if err := st.RemoveOwned(o.ID); err != nil {
			m.sh.Log.Warn("refused ledger entry not removed", zap.Error(err))
		}
		return
	}
	if !proof.Complete {
		progress := func(p *protocol.Proof) {
			m.notifyProof(st, p)
			m.notePendingRecovery(o.ID, p)
		}
		progress(proof)
		var ok bool
		if proof, ok = cleanup.Retain(cleanup.Retained{First: proof, Terminate: end, Backoff: m.sh.Backoff(),
			Stop: m.stopCh, Progress: progress}); !ok {
			return
		}
	}
	m.notePendingRecovery(o.ID, nil)
	if err := st.RemoveOwned(o.ID); err != nil {
		m.sh.Log.Warn("ledger entry not removed", zap.Error(err))
	}
	launch.RemoveSessionTmp(o.ID) // a dead sidecar's private TMPDIR of that session
	_ = st.Update(o.SessionKey, func(r *store.Record) error {
		// Only the record that leftover's admission wrote (same provider
		// pid): a session opened since then owns the key now.
		if r.Pid != nil && *r.Pid == o.Pid && o.Pid > 0 && !r.Closed {
			r.Closed = true
			now := store.FormatTime(time.Now())
			r.ClosedAt = &now
		}
		return nil
	})
	m.sh.Log.Info("recovered a leftover provider tree", zap.String("session", o.Session))
	m.sh.Stats.CountRecovered()
	m.notifyProof(st, proof)
}

// leftoverTerminator kills what is left of one ledger entry — what it can
// prove is the entry's tree (the Launcher's Recoverer: reaper.Recover,
// tablemode.Recover) — each time it is called. Errors:
// reaper.ErrUnprovable.
func (m *Manager) leftoverTerminator(o store.Owned) cleanup.Terminator {
	own := ""
	if m.sh.Config.Launcher != nil {
		own = m.sh.Config.Launcher.CgroupParent()
	}
	l := reaper.Leftover{Pid: o.Pid, StartTicks: o.StartTime, Pgid: o.Pgid, SidecarPid: o.SidecarPid,
		Session: o.Session, Cgroup: o.Cgroup, CgroupParent: o.CgroupParent, MarkerSHA256: o.MarkerSHA256, OwnParent: own}
	recoverFn := launch.Recover
	if r, ok := m.sh.Config.Launcher.(launch.Recoverer); ok {
		recoverFn = r.Recover
	}
	return func() (reaper.Termination, error) {
		t, err := recoverFn(o.Containment, l, m.sh.Config.Bounds.KillGrace)
		if o.Containment != "" {
			// The proof names the mode the tree was launched under, as the
			// ledger recorded it ("subreaper", not the recovery's
			// "process-group": docs/protocol.md §2, reported under the name
			// asked for; found by a fresh-user trial).
			t.Containment = reaper.Mode(o.Containment)
		}
		return t, err
	}
}

// notifyProof sends a recovered proof, journaled as the sessionKey's
// (docs/protocol.md §16: a host catching up on that key reads it) while
// holding the key; when another sidecar holds the key now (it opened the
// key after the dead sidecar), that session's journal is left alone and
// the proof is only sent (cleanup.Publish).
func (m *Manager) notifyProof(st *store.Store, p *protocol.Proof) {
	m.sh.PublishProof(st, p, cleanup.Delivery{Journal: true, Notify: true})
}

// notePendingRecovery remembers (p non-nil) or forgets the latest
// incomplete proof of a recovery still being retried; shutdown reports
// those it could not finish (and then exits 1).
func (m *Manager) notePendingRecovery(id string, p *protocol.Proof) { m.recovering.Note(id, p) }

// StoreFor returns the store of stateDir dir (keyed by its cleaned path),
// opening it (and sweeping its ledger once the host is initialized) on
// first use (session.Router). Errors: store.Open's.
func (m *Manager) StoreFor(dir string) (*store.Store, error) { return m.storeForSweep(dir, nil) }

// storeForSweep is StoreFor; the ledger sweep of a store it opens counts
// in first (may be nil; recover.go).
func (m *Manager) storeForSweep(dir string, first *sync.WaitGroup) (*store.Store, error) {
	st, sweep, err := m.sh.Stores.Open(dir)
	if sweep {
		m.sweepLedger(st, first)
	}
	return st, err
}
