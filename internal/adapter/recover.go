package adapter

import (
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/protocol"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
)

// selfStart is this sidecar's start time (clock ticks), recorded in every
// ledger entry so a later sidecar can tell a live owner from a recycled pid.
var selfStart, _ = store.ProcStartTime(os.Getpid())

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
	st, err := store.ReadProcStat(o.SidecarPid)
	if err != nil || st.State == 'Z' {
		return false
	}
	return o.SidecarStartTime == 0 || st.StartTime == o.SidecarStartTime
}

// sweep kills the leftovers of dead sidecars found in st's ledger and
// reports each as a cleanup/proof with origin "recovered" (ARCHITECTURE
// "Durability"; issue 4). It runs in a goroutine owned by the manager's
// retained group. Caller holds m.mu or is the only user of st.
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
			started := protocol.At(time.Now())
			t := reaper.Recover(reaper.Leftover{Pid: o.Pid, StartTicks: o.StartTime, Pgid: o.Pgid, Cgroup: o.Cgroup,
				CgroupGlob: cgroupGlob(o), Marker: o.Marker}, m.cfg.KillGrace)
			proof := &protocol.Proof{CleanupID: newID("c-"), Session: o.Session, SessionKey: o.SessionKey,
				Reason: "leftover of sidecar pid " + strconv.Itoa(o.SidecarPid), Origin: "recovered",
				ProtocolClose: protocol.ProtocolClose{Outcome: "skipped"}, Signals: []protocol.ProofSignal{},
				Processes: []protocol.ProofProcess{}, StartedAt: started, Errors: []protocol.ProofError{}, Attempts: 1}
			applyTerminationTo(proof, t, func(s string) string { return s })
			proof.Containment = string(t.Containment)
			proof.FinishedAt = protocol.At(time.Now())
			proof.DurationMs = proof.FinishedAt.Sub(started.Time).Milliseconds()
			if proof.Complete {
				if err := st.RemoveOwned(o.ID); err != nil {
					m.log.Warn("ledger entry not removed", zap.Error(err))
				}
				_ = st.Update(o.SessionKey, func(r *store.Record) error {
					if r.AcpSessionID != "" && !r.Closed {
						r.Closed = true
						now := nowStamp()
						r.ClosedAt = &now
					}
					return nil
				})
			}
			m.log.Info("recovered a leftover provider tree", zap.String("session", o.Session), zap.Bool("complete", proof.Complete))
			if err := m.host.Notify(protocol.NotifyCleanupProof, protocol.ProofNotice{Proof: proof}); err != nil {
				m.log.Debug("recovered proof not delivered", zap.Error(err))
			}
		}
	}()
}
