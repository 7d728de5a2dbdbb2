package adapter

import (
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// selfStart is this sidecar's start time (procStart), recorded in every
// ledger entry so a later sidecar can tell a live owner from a recycled pid.
var selfStart, _ = procStart(os.Getpid())

// Initialized sweeps the default stateDir's ownership ledger once the host
// has the initialize result; other stateDirs are swept when first used.
func (m *Manager) Initialized() {
	m.mu.Lock()
	m.initialized = true
	stores := make([]*store.Store, 0, len(m.stores))
	for _, st := range m.stores {
		stores = append(stores, st)
	}
	m.mu.Unlock()
	for _, st := range stores {
		m.sweep(st)
	}
	if m.cfg.StateDir != "" {
		if _, err := m.storeFor(m.cfg.StateDir); err != nil {
			m.log.Warn("default state directory unusable", zap.Error(err))
		}
	}
}

// cgroupGlob matches the provider cgroups an entry written before its
// launch may have (the reaper names them <parent>/acpx-<session>-<n>).
func cgroupGlob(o store.Owned) string {
	if o.Cgroup != "" || o.CgroupParent == "" {
		return ""
	}
	return filepath.Join(o.CgroupParent, "acpx-"+o.Session+"-*")
}

// ownerAlive reports whether the sidecar that wrote o still runs.
func ownerAlive(o store.Owned) bool {
	if o.SidecarPid == os.Getpid() {
		return true
	}
	start, alive := procStart(o.SidecarPid)
	if !alive {
		return false
	}
	return o.SidecarStartTime == 0 || start == o.SidecarStartTime
}

// sweep kills the leftovers of dead sidecars found in st's ledger and
// reports each as a cleanup/proof with origin "recovered"
// (docs/operations.md, "The ownership ledger"). It runs in a goroutine owned
// by the manager's retained group. Caller holds m.mu or is the only user of
// st.
func (m *Manager) sweep(st *store.Store) {
	m.retained.Add(1)
	go func() {
		defer m.retained.Done()
		if n := st.RemoveStaleTemps(time.Minute); n > 0 {
			m.log.Info("removed temp files of interrupted writes", zap.Int("count", n))
		}
		owned, err := st.ListOwned()
		if err != nil {
			m.log.Warn("ownership ledger partly unreadable", zap.Error(err))
		}
		for _, o := range owned {
			if ownerAlive(o) {
				continue
			}
			m.retained.Add(1)
			go func(o store.Owned) {
				defer m.retained.Done()
				m.recoverEntry(st, o)
			}(o)
		}
	}()
}

// recoverEntry recovers one dead sidecar's ledger entry. An incomplete
// recovery is reported, then retried with the retained backoff until it is
// proven or the sidecar stops; the final proof (same cleanupId, attempts
// counted) follows as another cleanup/proof.
func (m *Manager) recoverEntry(st *store.Store, o store.Owned) {
	proof := m.recoverOne(o)
	for backoff := m.cfg.RetainedRetryMin; !proof.Complete; {
		m.notifyProof(st, o.SessionKey, proof)
		m.notePendingRecovery(o.ID, proof)
		select {
		case <-time.After(backoff):
		case <-m.stopCh:
			return
		}
		if backoff *= 2; backoff > m.cfg.RetainedRetryMax {
			backoff = m.cfg.RetainedRetryMax
		}
		next := m.recoverOne(o)
		next.CleanupID, next.StartedAt, next.Attempts = proof.CleanupID, proof.StartedAt, proof.Attempts+1
		next.DurationMs = next.FinishedAt.Sub(next.StartedAt.Time).Milliseconds()
		proof = next
	}
	m.notePendingRecovery(o.ID, nil)
	if err := st.RemoveOwned(o.ID); err != nil {
		m.log.Warn("ledger entry not removed", zap.Error(err))
	}
	_ = st.Update(o.SessionKey, func(r *store.Record) error {
		// Only the record that leftover's admission wrote (same provider
		// pid): a session opened since then owns the key now.
		if r.Pid != nil && *r.Pid == o.Pid && o.Pid > 0 && !r.Closed {
			r.Closed = true
			now := nowStamp()
			r.ClosedAt = &now
		}
		return nil
	})
	m.log.Info("recovered a leftover provider tree", zap.String("session", o.Session))
	m.stats.recovered.Add(1)
	m.notifyProof(st, o.SessionKey, proof)
}

// recoverOne kills what is left of one ledger entry and builds its proof.
func (m *Manager) recoverOne(o store.Owned) *protocol.Proof {
	started := protocol.At(time.Now())
	t := recoverLeftover(o.Containment, reaper.Leftover{Pid: o.Pid, StartTicks: o.StartTime, Pgid: o.Pgid, Cgroup: o.Cgroup,
		CgroupGlob: cgroupGlob(o), Marker: o.Marker}, m.cfg.KillGrace)
	proof := &protocol.Proof{CleanupID: newID("c-"), Session: o.Session, SessionKey: o.SessionKey,
		Reason: "leftover of sidecar pid " + strconv.Itoa(o.SidecarPid), Origin: protocol.OriginRecovered,
		ProtocolClose: protocol.ProtocolClose{Outcome: protocol.CloseSkipped}, Signals: []protocol.ProofSignal{},
		Processes: []protocol.ProofProcess{}, StartedAt: started, Errors: []protocol.ProofError{}, Attempts: 1}
	applyTerminationTo(proof, t, func(s string) string { return s })
	proof.Containment = string(t.Containment)
	proof.FinishedAt = protocol.At(time.Now())
	proof.DurationMs = proof.FinishedAt.Sub(started.Time).Milliseconds()
	return proof
}

// notifyProof sends a recovered proof, journaled as the sessionKey's
// (docs/protocol.md §16: a host catching up on that key reads it) while
// holding the key; when another sidecar holds the key now (it opened the
// key after the dead sidecar), that session's journal is left alone and
// the proof is only sent.
func (m *Manager) notifyProof(st *store.Store, key string, p *protocol.Proof) {
	dir := st.Dir()
	if hold, err := m.holdKey(st, key); err == nil {
		defer hold()
	} else {
		dir = ""
		m.log.Info("recovered proof not journaled: the key is held by another sidecar or its lock is unusable",
			zap.String("sessionKey", key), zap.Error(err))
	}
	m.notifyJournaled(dir, key, protocol.NotifyCleanupProof, protocol.ProofNotice{Proof: p})
}

// notePendingRecovery remembers (p non-nil) or forgets the latest
// incomplete proof of a recovery still being retried; shutdown reports
// those it could not finish (and then exits 1).
func (m *Manager) notePendingRecovery(id string, p *protocol.Proof) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p == nil {
		delete(m.pendingRecovered, id)
		return
	}
	m.pendingRecovered[id] = p
}
