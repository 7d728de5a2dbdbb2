package adapter

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
)

// The live sweep (docs/operations.md "The ownership ledger"; issue 33): a
// sidecar sweeps a state dir's ledger when it starts and when it first
// uses the dir, and then every Config.SweepInterval while it runs, so a
// sidecar SIGKILLed beside a live one on a shared state dir has its
// leftovers (ledger entries and the trees they name, private TMPDIRs, the
// cgroups of cgroup containment) recovered within one interval, with the
// same proof-before-kill rules and `origin: "recovered"` proofs to this
// sidecar's host. A tick costs a listing of each ledger and a /proc stat
// per entry's owner: the trees of an entry are looked for (a process scan
// in process-table containment) only once its owner is proven gone — its
// pid gone or its start time another process's.

// startSweeper starts the periodic sweep (Config.SweepInterval ≤ 0: none);
// it stops with the manager (stopCh) and is waited for by Wait.
func (m *Manager) startSweeper() {
	d := m.sh.Config.SweepInterval
	if d <= 0 {
		return
	}
	m.background.Add(1)
	go func() {
		defer m.background.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-m.stopCh:
				return
			case <-t.C:
				m.sweepLive()
			}
		}
	}()
}

// sweepLive is one tick: every store's ledger (entries of dead owners not
// being recovered already), the stale spare TMPDIRs, then the cgroups of
// dead sidecars.
func (m *Manager) sweepLive() {
	m.mu.Lock()
	closing := m.closing
	m.mu.Unlock()
	if closing {
		return // shutdown owns the rest; the next sidecar sweeps what is left
	}
	if n := registry.RemoveStaleTmpSpares(); n > 0 {
		m.sh.Log.Info("removed stale spare TMPDIRs", zap.Int("count", n))
	}
	var first sync.WaitGroup
	for _, st := range m.sh.Stores.All() {
		m.sweepLedger(st, &first)
	}
	m.sweepCgroupsAfter(&first)
}
