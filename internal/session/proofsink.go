package session

import (
	"encoding/json"
	"errors"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// proofSink is cleanup.ProofSink over this Manager's key locks, journals
// and host, for the state directory of st.
type proofSink struct {
	m  *Shared
	st *store.Store
}

var _ cleanup.ProofSink = proofSink{}

// HoldKey takes the key's flock (a reference when this sidecar holds it).
func (p proofSink) HoldKey(key string) (func(), error) { return p.m.KeyLocks.Hold(p.st, key) }

// Journal appends raw to key's journal as session's cleanup/proof entry,
// synced.
func (p proofSink) Journal(key, session string, raw json.RawMessage) error {
	j, release, err := p.m.Journals.Acquire(filepath.Join(p.st.Dir(), "sessions"), key)
	if err != nil {
		return err
	}
	defer release()
	j.AppendSessionNotice(session, protocol.NotifyCleanupProof, raw)
	return j.Sync()
}

// Notify sends raw to the host as cleanup/proof.
func (p proofSink) Notify(raw json.RawMessage) error {
	return p.m.Host.Notify(protocol.NotifyCleanupProof, raw)
}

// PublishProof hands proof on through cleanup.Publish and logs what could
// not be done (what names the proof only; never its content).
func (m *Shared) PublishProof(st *store.Store, proof *protocol.Proof, d cleanup.Delivery) cleanup.Published {
	res := cleanup.Publish(proofSink{m, st}, proof, d)
	log := m.Log.With(zap.String("session", proof.Session), zap.String("cleanupId", proof.CleanupID))
	switch {
	case res.Err != nil:
		log.Error("proof not encodable (a bug)", zap.Error(res.Err))
	case errors.Is(res.JournalErr, store.ErrKeyHeld):
		log.Info("proof not journaled: another sidecar holds the key now", zap.String("sessionKey", proof.SessionKey))
	case res.JournalErr != nil:
		log.Warn("proof not journaled", zap.Error(res.JournalErr))
	}
	if res.NotifyErr != nil {
		log.Debug("proof not delivered", zap.Error(res.NotifyErr))
	}
	return res
}
