// Package stats holds the sidecar's counters for sidecar/stats
// (docs/protocol.md §17): turns queued and answered, updates forwarded
// and dropped, proofs, recoveries and close-to-proof times. Every session
// actor and the Manager count into one Counters; any goroutine may. It
// imports nothing of the sidecar but protocol.
package stats

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// closeSamples is how many host closes closeToProofMs is computed over.
const closeSamples = 1024

// Counters are the counters of sidecar/stats (docs/protocol.md §17).
// Counters only grow; gauges (turnsQueued, retained) go up and down. Any
// goroutine may update them.
type Counters struct {
	turnsQueued      atomic.Int64
	completed        atomic.Uint64
	failed           atomic.Uint64
	cancelled        atomic.Uint64
	updatesForwarded atomic.Uint64
	updatesDropped   atomic.Uint64 // not ACP SessionUpdates (docs/protocol.md §17)
	proofsComplete   atomic.Uint64
	proofsIncomplete atomic.Uint64
	retained         atomic.Int64
	recovered        atomic.Uint64

	mu      sync.Mutex
	closeMs []float64 // ring of the last closeSamples close → proof times
	next    int
}

// CountTurn counts an answered turn by its status.
func (st *Counters) CountTurn(status protocol.TurnStatus) {
	switch status {
	case protocol.TurnCompleted:
		st.completed.Add(1)
	case protocol.TurnCancelled:
		st.cancelled.Add(1)
	default:
		st.failed.Add(1)
	}
}

// CountProof counts the first proof of a cleanup.
func (st *Counters) CountProof(p *protocol.Proof) {
	if p.Complete {
		st.proofsComplete.Add(1)
	} else {
		st.proofsIncomplete.Add(1)
	}
}

// SampleClose records one host close's time from request to proof.
func (st *Counters) SampleClose(d time.Duration) {
	ms := float64(d.Microseconds()) / 1000
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.closeMs) < closeSamples {
		st.closeMs = append(st.closeMs, ms)
		return
	}
	st.closeMs[st.next] = ms
	st.next = (st.next + 1) % closeSamples
}

// percentiles returns p50 and p99 (nearest rank) of the close samples.
func (st *Counters) percentiles() protocol.Percentiles {
	st.mu.Lock()
	v := append([]float64(nil), st.closeMs...)
	st.mu.Unlock()
	if len(v) == 0 {
		return protocol.Percentiles{}
	}
	sort.Float64s(v)
	rank := func(p float64) float64 {
		i := int(p*float64(len(v))+0.999999) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(v) {
			i = len(v) - 1
		}
		return v[i]
	}
	return protocol.Percentiles{P50: rank(0.50), P99: rank(0.99)}
}

// CountRecovered counts a leftover tree recovered (sidecar/stats
// proofs.recovered).
func (st *Counters) CountRecovered() { st.recovered.Add(1) }

// Fill sets res's counters from st: turns queued and answered (by
// status; res.Turns.Running is the caller's), updates forwarded and
// dropped, proofs, and the close-to-proof percentiles (ms).
func (st *Counters) Fill(res *protocol.StatsResult) {
	res.Turns.Queued = int(st.turnsQueued.Load())
	res.Turns.Completed, res.Turns.Failed, res.Turns.Cancelled = st.completed.Load(), st.failed.Load(), st.cancelled.Load()
	res.UpdatesForwarded = st.updatesForwarded.Load()
	res.UpdatesDropped = st.updatesDropped.Load()
	res.Proofs = protocol.StatsProofs{Complete: st.proofsComplete.Load(), Incomplete: st.proofsIncomplete.Load(),
		Retained: int(st.retained.Load()), Recovered: st.recovered.Load()}
	res.CloseToProofMs = st.percentiles()
}

// Queued moves the turns-queued gauge by delta (+1 queued, -1 left the
// queue).
func (st *Counters) Queued(delta int64) { st.turnsQueued.Add(delta) }

// Retained moves the retained-cleanups gauge by delta.
func (st *Counters) Retained(delta int64) { st.retained.Add(delta) }

// DropUpdate counts an agent update dropped: not an ACP SessionUpdate.
func (st *Counters) DropUpdate() { st.updatesDropped.Add(1) }

// Forwarded is the count of updates forwarded to the host, for the
// session's out-queue to add to (internal/outbox).
func (st *Counters) Forwarded() *atomic.Uint64 { return &st.updatesForwarded }
