package adapter

import (
	"encoding/json"
	"sync"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// A shutdown's proofs must outlive the host that may never read them
// (docs/protocol.md §16, "Proofs at shutdown"): whatever started the
// shutdown — the `shutdown` request, `exit`, stdin EOF, SIGTERM — every
// session's final proof is appended to its key's journal as a
// cleanup/proof entry (synced) and logged, before the sidecar answers
// `shutdown` or exits. When the host did not ask for the shutdown, the
// proofs this shutdown made (origin "shutdown") are also sent as
// cleanup/proof, since no `shutdown` result will carry them.

// ShutdownRequester is implemented by a Host that can tell whether the
// current shutdown is the host's own `shutdown` request (*rpc.Server).
// A Host without it is taken as not having asked.
type ShutdownRequester interface {
	// ShutdownRequested reports whether the host sent `shutdown`.
	ShutdownRequested() bool
}

// shutdownProof is one session's final proof at shutdown and what the
// host already has of it.
type shutdownProof struct {
	s     *session.Actor
	proof *protocol.Proof
	// delivered: the proof was already sent and journaled as cleanup/proof
	// (a dead session's provider-exit proof).
	delivered bool
}

// shutdownJournalWorkers bounds the journals written (and fsynced) at
// once by recordShutdownProofs.
const shutdownJournalWorkers = 8

// recordShutdownProofs logs and journals the final proofs of a shutdown,
// then, when the host did not ask for the shutdown, sends those it made.
// Every entry is journaled before the first frame is written, so a host
// that stopped reading (a write blocks) costs no entry. It runs in
// Shutdown before it returns.
func (m *Manager) recordShutdownProofs(proofs []shutdownProof) {
	requested := false
	if r, ok := m.sh.Host.(ShutdownRequester); ok {
		requested = r.ShutdownRequested()
	}
	raws := make([]json.RawMessage, len(proofs))
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < shutdownJournalWorkers && w < len(proofs); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				raws[i] = m.journalProof(proofs[i].s.StateDir(), proofs[i].proof)
			}
		}()
	}
	for i, sp := range proofs {
		p := sp.proof
		m.sh.Log.Info("shutdown proof", zap.String("session", p.Session), zap.String("sessionKey", p.SessionKey),
			zap.String("cleanupId", p.CleanupID), zap.String("origin", string(p.Origin)),
			zap.Bool("complete", p.Complete), zap.Int("processes", len(p.Processes)), zap.Bool("requested", requested))
		if sp.delivered {
			continue
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if requested {
		return
	}
	for i, sp := range proofs {
		if raws[i] == nil || sp.proof.Origin != protocol.OriginShutdown {
			continue
		}
		if err := m.sh.Host.Notify(protocol.NotifyCleanupProof, raws[i]); err != nil {
			m.sh.Log.Debug("shutdown proof not delivered", zap.String("session", sp.proof.Session), zap.Error(err))
		}
	}
}

// journalProof appends proof to its key's journal in stateDir as a
// cleanup/proof entry, synced, holding the key meanwhile (cleanup.Publish:
// a key another sidecar holds now is not written to), and returns the
// cleanup/proof params to send (nil if proof is not encodable). A state
// directory that cannot be used is logged; the proof is still returned.
func (m *Manager) journalProof(stateDir string, proof *protocol.Proof) json.RawMessage {
	d := cleanup.Delivery{Journal: stateDir != "" && proof.SessionKey != ""}
	var st *store.Store
	if d.Journal {
		var err error
		if st, err = m.StoreFor(stateDir); err != nil {
			m.sh.Log.Warn("shutdown proof not journaled: the state directory cannot be used", zap.Error(err))
			d.Journal = false
		}
	}
	return m.sh.PublishProof(st, proof, d).Raw
}
